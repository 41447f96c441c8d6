import type { TLSSocket } from 'node:tls';
import type { Resolver } from '../../src/adapters/webhooks/address-guard';
import { WebhookHttpClient } from '../../src/adapters/webhooks/http-client';
import { startConnectProxy } from '../support/connect-proxy';
import { HOOKS_TLS, TEST_CA, UNTRUSTED_TLS } from '../support/tls';
import { startReceiver } from '../support/webhook-receiver';

// Webhooks over https, as every production endpoint is (docs/webhooks.md, "Safety"): the endpoint's certificate
// must chain to a trusted authority and name the URL's host, names resolved by our own lookup (the address guard's
// path) keep their name for SNI and the certificate check, and through an egress proxy the TLS runs end to end
// (the proxy sees only ciphertext), whether the proxy itself is reached over http or https.

const BODY = JSON.stringify({ type: 'message.sent', marker: 'plaintext-marker-7f3a' });
/** the outside DNS: every name answers the receiver's loopback address */
const toLoopback: Resolver = (_host, _options, callback) => callback(null, [{ address: '127.0.0.1', family: 4 }]);

describe('webhooks over TLS (a real https receiver)', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let untrusted: Awaited<ReturnType<typeof startReceiver>>;
  const servernames: Array<string | false> = [];
  const clients: WebhookHttpClient[] = [];
  const client = (options: Partial<ConstructorParameters<typeof WebhookHttpClient>[0]> = {}) => {
    const c = new WebhookHttpClient({ timeoutMs: 5000, maxBodyBytes: 1024, allowPrivate: true, ca: TEST_CA, ...options });
    clients.push(c);
    return c;
  };
  const post = (c: WebhookHttpClient, url: string) => c.post({ url, headers: { 'webhook-id': 'msg_tls' }, body: BODY });

  beforeAll(async () => {
    receiver = await startReceiver({ tls: HOOKS_TLS });
    receiver.server.on('secureConnection', (socket: TLSSocket) => servernames.push((socket as TLSSocket & { servername: string | false }).servername));
    untrusted = await startReceiver({ tls: UNTRUSTED_TLS });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await receiver.close();
    await untrusted.close();
  });

  it('posts to an endpoint whose certificate chains to a trusted authority: answered, the body as sent', async () => {
    const res = await post(client(), receiver.url('/direct'));
    expect(res).toMatchObject({ statusCode: 204, failure: null, error: null });
    expect(receiver.received.find((r) => r.path === '/direct')).toMatchObject({ body: BODY, headers: { 'webhook-id': 'msg_tls' } });
  });

  it('a certificate chaining to no trusted authority is a connection_error naming the reason; nothing is sent', async () => {
    const res = await post(client(), untrusted.url('/self-signed'));
    expect(res).toMatchObject({ statusCode: null, failure: 'connection_error', error: expect.stringMatching(/^self-signed certificate/) }) // Node 24 adds a hint after it;
    // the system's authorities (no test CA) do not know the test CA either
    const system = await post(client({ ca: undefined }), receiver.url('/system-roots'));
    expect(system).toMatchObject({ statusCode: null, failure: 'connection_error', error: expect.stringMatching(/^unable to verify the first certificate/) });
    expect(untrusted.received).toEqual([]);
    expect(receiver.received.filter((r) => r.path === '/system-roots')).toEqual([]);
  });

  it("a name resolved by our lookup (the address guard's path) is still the name TLS checks: SNI sent, another name refused", async () => {
    const port = new URL(receiver.url()).port;
    const named = client({ resolve: toLoopback });
    servernames.length = 0;
    expect(await post(named, `https://hooks.example.test:${port}/named`)).toMatchObject({ statusCode: 204 });
    expect(servernames).toEqual(['hooks.example.test']);
    const other = await post(named, `https://other.example.test:${port}/other`);
    expect(other).toMatchObject({ statusCode: null, failure: 'connection_error', error: expect.stringContaining("Hostname/IP does not match certificate's altnames") });
    expect(receiver.received.filter((r) => r.path === '/other')).toEqual([]);
  });

  it.each([['http'], ['https']])('through an egress proxy reached over %s: TLS end to end, the proxy sees the target and only ciphertext', async (scheme) => {
    const proxy = await startConnectProxy(() => false, { route: () => '127.0.0.1', ...(scheme === 'https' ? { tls: HOOKS_TLS } : {}) });
    try {
      expect(proxy.url.startsWith(`${scheme}://`)).toBe(true);
      const port = new URL(receiver.url()).port;
      const res = await post(client({ proxyUrl: proxy.url }), `https://hooks.example.test:${port}/proxied-${scheme}`);
      expect(res).toMatchObject({ statusCode: 204, failure: null });
      expect(receiver.received.find((r) => r.path === `/proxied-${scheme}`)).toMatchObject({ body: BODY });
      expect(proxy.tunnels).toEqual([`hooks.example.test:${port}`]);
      const seen = proxy.tunnelled();
      expect(seen.length).toBeGreaterThan(BODY.length);
      expect(seen.includes('plaintext-marker-7f3a')).toBe(false);
      expect(seen.includes('webhook-id')).toBe(false);
      // the certificate is checked through the tunnel too
      const bad = await post(client({ proxyUrl: proxy.url }), `https://hooks.example.test:${new URL(untrusted.url()).port}/proxied-untrusted`);
      expect(bad).toMatchObject({ statusCode: null, failure: 'connection_error', error: expect.stringMatching(/^self-signed certificate/) }) // Node 24 adds a hint after it;
    } finally {
      await proxy.close();
    }
  });
});
