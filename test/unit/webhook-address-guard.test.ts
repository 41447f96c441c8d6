import type { LookupAddress } from 'node:dns';
import { ForbiddenAddressError, guardLookup, isForbiddenAddress, literalHostRefusal, urlRefusal, type Resolver } from '../../src/adapters/webhooks/address-guard';

// Which addresses a webhook may reach (docs/webhooks.md, "Safety"): public unicast only, judged on what an address
// reaches, including the IPv4 address inside IPv4-mapped, NAT64 and 6to4 IPv6 addresses.

const FORBIDDEN: Array<[string, string]> = [
  ['0.0.0.0', 'unspecified'], ['0.1.2.3', '"this network"'], ['10.1.2.3', 'private'], ['172.16.0.1', 'private'],
  ['192.168.1.1', 'private'], ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'], ['169.254.169.254', 'link-local (cloud metadata)'],
  ['100.64.0.1', 'carrier-grade NAT'], ['224.0.0.1', 'multicast'], ['255.255.255.255', 'broadcast'], ['240.0.0.1', 'reserved'],
  ['192.0.0.8', 'IETF protocol assignments'], ['192.0.2.1', 'documentation'], ['198.51.100.7', 'documentation'], ['198.18.0.1', 'benchmarking'],
  ['::', 'unspecified'], ['::1', 'loopback'], ['fe80::1', 'link-local'], ['fc00::1', 'unique local'], ['fd12:3456::1', 'unique local'],
  ['ff02::1', 'multicast'], ['fec0::1', 'deprecated site-local'], ['100::1', 'discard'], ['2001:db8::1', 'documentation'],
  ['2001::1', 'Teredo'], ['3fff::1', 'documentation'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback'], ['::ffff:7f00:1', 'IPv4-mapped loopback, hex'], ['::ffff:a9fe:a9fe', 'IPv4-mapped link-local'],
  ['::7f00:1', 'IPv4-compatible (deprecated) loopback'], ['::808:808', 'IPv4-compatible (deprecated), even of a public address'],
  ['::ffff:0:7f00:1', 'IPv4-translated loopback'],
  ['64:ff9b::a9fe:a9fe', 'NAT64 of the cloud metadata address'], ['64:ff9b::a00:1', 'NAT64 of a private address'], ['64:ff9b::7f00:1', 'NAT64 of loopback'],
  ['64:ff9b:1::808:808', 'local-use NAT64 prefix'],
  ['2002:a00:1::1', '6to4 of a private address'], ['2002:7f00:1::1', '6to4 of loopback'],
  ['not-an-address', 'not an IP address'],
];

const ALLOWED: Array<[string, string]> = [
  ['8.8.8.8', 'public IPv4'], ['93.184.215.14', 'public IPv4'], ['2606:4700:4700::1111', 'global unicast IPv6'],
  ['2001:4860:4860::8888', 'global unicast IPv6'], ['::ffff:8.8.8.8', 'IPv4-mapped public'], ['64:ff9b::808:808', 'NAT64 of a public address (DNS64)'],
  ['2002:808:808::1', '6to4 of a public address'],
];

describe('webhook address guard', () => {
  it.each(FORBIDDEN)('%s is forbidden (%s)', (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  it.each(ALLOWED)('%s is allowed (%s)', (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });

  const rules = { allowHttp: false, allowPrivate: false };
  const refused = 'url must not point to a private, loopback or link-local address';

  it.each([
    'https://localhost./in', 'https://LOCALHOST./in', 'https://hooks.localhost./in', 'https://[64:ff9b::a9fe:a9fe]/in',
    'https://[::7f00:1]/in', 'https://[2002:a00:1::1]/in', 'https://0x7f000001/in', 'https://127.1/in', 'https://[::ffff:0:7f00:1]/in',
  ])('registration refuses %s', (url) => {
    expect(urlRefusal(url, rules)).toBe(refused);
  });

  it.each(['https://hooks.example.com/in', 'https://8.8.8.8/in', 'https://[64:ff9b::808:808]/in', 'https://localhost.example.com/in'])('registration accepts %s', (url) => {
    expect(urlRefusal(url, rules)).toBeNull();
  });

  it('refuses port 0 (nothing listens there)', () => {
    expect(urlRefusal('https://hooks.example.com:0/in', rules)).toBe('url must not use port 0');
    expect(urlRefusal('https://hooks.example.com:8443/in', rules)).toBeNull();
  });

  // Node 20's URL parser refuses these hosts, Node 22 and later keep them as written: refused on both alike
  it.each(['https://xn--/in', 'https://xn--:/in', 'https://xn--a.example/in', 'https://hooks.xn--/in'])('refuses %s (a punycode label that does not decode)', (url) => {
    expect(urlRefusal(url, { allowHttp: false, allowPrivate: true })).toBe('url must be an absolute URL');
  });

  it('accepts an internationalised name, written either way', () => {
    expect(urlRefusal('https://xn--bcher-kva.example/in', rules)).toBeNull();
    expect(urlRefusal('https://bücher.example/in', rules)).toBeNull();
  });

  it('the operator setting allows private addresses', () => {
    expect(urlRefusal('https://localhost./in', { allowHttp: false, allowPrivate: true })).toBeNull();
  });

  it('refuses a literal forbidden host before connecting', () => {
    expect(literalHostRefusal(new URL('https://localhost./in'))).toBe('localhost. is a forbidden address');
    expect(literalHostRefusal(new URL('https://[64:ff9b::7f00:1]/in'))).toBe('64:ff9b::7f00:1 is a forbidden address');
    expect(literalHostRefusal(new URL('https://[2606:4700:4700::1111]/in'))).toBeNull();
  });

  it('refuses, at connection time, a name whose DNS answers include a forbidden address (DNS64 of a private one)', async () => {
    const answering = (addresses: LookupAddress[]): Resolver => (_host, _options, callback) => callback(null, addresses);
    const lookup = (resolver: Resolver) => new Promise<{ err: unknown; address: unknown }>((done) =>
      guardLookup(resolver)('hooks.example', { all: true }, (err, address) => done({ err, address })));

    const rebound = await lookup(answering([{ address: '64:ff9b::808:808', family: 6 }, { address: '64:ff9b::a00:5', family: 6 }]));
    expect(rebound.err).toBeInstanceOf(ForbiddenAddressError);
    expect((rebound.err as Error).message).toBe('hooks.example resolves to a forbidden address (64:ff9b::a00:5)');

    const publicHost = await lookup(answering([{ address: '64:ff9b::808:808', family: 6 }]));
    expect(publicHost).toEqual({ err: null, address: [{ address: '64:ff9b::808:808', family: 6 }] });
  });
});
