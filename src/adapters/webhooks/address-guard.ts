import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';

// Addresses a webhook must never reach unless the operator allows it (WEBHOOKS_ALLOW_PRIVATE_URLS): private,
// loopback, link-local, carrier-grade NAT, unspecified, multicast and reserved ranges, IPv4 and IPv6.
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8]] as const) blocked.addSubnet(net, prefix, 'ipv6');

export function isForbiddenAddress(address: string): boolean {
  const v = isIP(address);
  if (v === 4) return blocked.check(address, 'ipv4');
  if (v === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    return mapped ? blocked.check(mapped[1], 'ipv4') : blocked.check(address, 'ipv6');
  }
  return true;
}

export class ForbiddenAddressError extends Error {
  override name = 'ForbiddenAddressError';
}

const bare = (host: string) => host.replace(/^\[|\]$/g, '');

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
  if (url.protocol !== 'https:' && !(options.allowHttp && url.protocol === 'http:')) return 'url must use https';
  if (url.username || url.password) return 'url must not carry credentials';
  if (options.allowPrivate) return null;
  const host = bare(url.hostname).toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return 'url must not point to a private, loopback or link-local address';
  if (isIP(host) && isForbiddenAddress(host)) return 'url must not point to a private, loopback or link-local address';
  return null;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
/** How names are resolved (node:dns `lookup` with `all: true`). */
export type Resolver = (hostname: string, options: { all: true }, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

/** A `lookup` for http.request that refuses forbidden addresses at connection time (DNS rebinding). */
export function guardLookup(resolve: Resolver) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    resolve(hostname, { all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const bad = addresses.find((a) => isForbiddenAddress(a.address));
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
  if (host.toLowerCase() === 'localhost') return 'localhost is a forbidden address';
  return isIP(host) && isForbiddenAddress(host) ? `${host} is a forbidden address` : null;
}
