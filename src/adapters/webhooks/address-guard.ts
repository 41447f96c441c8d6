import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { domainToUnicode } from 'node:url';
import ipaddr from 'ipaddr.js';

// Addresses a webhook must never reach unless the operator allows it (WEBHOOKS_ALLOW_PRIVATE_URLS): everything
// but public unicast, as ipaddr.js classifies the IANA special-purpose registries (private, loopback, link-local,
// carrier-grade NAT, unspecified, multicast, broadcast, documentation, benchmarking and other reserved ranges).
// IPv6 must also be global unicast (2000::/3), which refuses the deprecated IPv4-compatible form (::a.b.c.d).
// An IPv4 address carried inside an IPv6 one is judged as that IPv4 address: IPv4-mapped (::ffff:a.b.c.d),
// NAT64 (64:ff9b::a.b.c.d, which DNS64 gives IPv4-only hosts on IPv6-only networks, and which a NAT64 gateway
// forwards to the IPv4 inside) and 6to4 (2002:aabb:ccdd::).
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

const ipv4Of = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);

function embeddedIPv4(address: ipaddr.IPv6, range: string): ipaddr.IPv4 | undefined {
  if (range === 'ipv4Mapped') return address.toIPv4Address();
  if (range === 'rfc6052' && address.match(NAT64_WELL_KNOWN)) return ipv4Of(address.parts[6], address.parts[7]);
  if (range === '6to4') return ipv4Of(address.parts[1], address.parts[2]);
  return undefined;
}

export function isForbiddenAddress(address: string): boolean {
  if (isIP(address) === 0) return true;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.range() !== 'unicast';
  const v6 = parsed as ipaddr.IPv6;
  const range = v6.range();
  const inner = embeddedIPv4(v6, range);
  if (inner !== undefined) return inner.range() !== 'unicast';
  return range !== 'unicast' || !v6.match(GLOBAL_UNICAST);
}

export class ForbiddenAddressError extends Error {
  override name = 'ForbiddenAddressError';
}

const bare = (host: string) => host.replace(/^\[|\]$/g, '');
/** `localhost`, a name under it (RFC 6761) or either written fully qualified (`localhost.`). */
const isLocalhostName = (host: string) => /(^|\.)localhost\.?$/i.test(host);

/**
 * A host with an `xn--` label that is not valid punycode (`xn--`, `xn--a`): Node 20's URL parser refuses it, Node 22
 * and later keep it as written (a name no DNS can hold), so it is refused here on every runtime alike.
 */
function hasUndecodableIdnLabel(hostname: string): boolean {
  if (!/(^|\.)xn--/i.test(hostname)) return false;
  const decoded = domainToUnicode(hostname);
  return decoded === '' || /(^|\.)xn--/i.test(decoded);
}

/**
 * Why a URL may not be registered, or null. Checks the scheme and a literal or `localhost` host; names are
 * checked again on every connection (the guarded lookup), so a DNS answer that changes later is caught there.
 */
export function urlRefusal(raw: string, options: { allowHttp: boolean; allowPrivate: boolean }): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url must be an absolute URL';
  }
  if (hasUndecodableIdnLabel(url.hostname)) return 'url must be an absolute URL';
  if (url.protocol !== 'https:' && !(options.allowHttp && url.protocol === 'http:')) return 'url must use https';
  if (url.username || url.password) return 'url must not carry credentials';
  if (url.port === '0') return 'url must not use port 0';
  if (options.allowPrivate) return null;
  return literalHostRefusal(url) === null ? null : 'url must not point to a private, loopback or link-local address';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
/** How names are resolved (node:dns `lookup` with `all: true`). */
export type Resolver = (hostname: string, options: { all: true }, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

/** A `lookup` for a connection through `resolve` (which refuses nothing: private addresses allowed). */
export const resolvingLookup = (resolve: Resolver) => guardLookup(resolve, () => false);

/** A `lookup` for a connection that refuses forbidden addresses at connection time (DNS rebinding). */
export function guardLookup(resolve: Resolver, forbidden: (address: string) => boolean = isForbiddenAddress) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    resolve(hostname, { all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const bad = addresses.find((a) => forbidden(a.address));
      if (bad) return callback(new ForbiddenAddressError(`${hostname} resolves to a forbidden address (${bad.address})`), []);
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

export const guardedLookup = guardLookup(dnsLookup as Resolver);

/** A literal IP host is never looked up: check it before connecting. */
export function literalHostRefusal(url: URL): string | null {
  const host = bare(url.hostname);
  if (isLocalhostName(host)) return `${host} is a forbidden address`;
  return isIP(host) && isForbiddenAddress(host) ? `${host} is a forbidden address` : null;
}
