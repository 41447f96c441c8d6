import { request as httpRequest, Agent } from 'node:http';
import type { AddressInfo } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { SHOP, sendsFixture } from '../support/sends';

// Review 16f, of 12bad68 (a text/plain body is refused with 415): a request with `Content-Type: text/plain` and no
// bytes has no body, as one with `Content-Type: application/json` and no bytes has (acceptEmptyJsonBodies): what
// `fetch(url, { method: 'POST', body: '' })` sends (text/plain;charset=UTF-8, Content-Length: 0), and `curl -X POST -H
// 'Content-Type: text/plain' URL`. Until 12bad68 a route that takes no body served it (fastify's text/plain parser read
// ''); 12bad68 answered it 415. A text/plain body with bytes is still 415.

const BASE = '/api/v1/webhook-endpoints/';

describe('a request with Content-Type text/plain and no body', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => t?.close());

  const create = async () => {
    const res = await t.app.inject({ method: 'POST', url: BASE, headers: { 'x-api-key': SHOP.key }, payload: { url: 'https://hooks.example/in', event_types: ['message.read'] } });
    expect(res.statusCode).toBe(201);
    return res.json() as { id: string; secret: string };
  };

  it.each(['text/plain;charset=UTF-8', 'text/plain'])('a route that takes no body (rotate-secret) serves it (%s)', async (type) => {
    const ep = await create();
    const res = await t.app.inject({
      method: 'POST', url: `${BASE}${ep.id}/rotate-secret/`, headers: { 'x-api-key': SHOP.key, 'content-type': type, 'content-length': '0' }, payload: '',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().secret).toEqual(expect.any(String));
    expect(res.json().secret).not.toBe(ep.secret);
  });

  it('a route that needs a body answers its own 400, as without the header', async () => {
    const url = '/api/v1/external/contacts/upsert/';
    const without = await t.app.inject({ method: 'POST', url, headers: { 'x-api-key': SHOP.key } });
    const withType = await t.app.inject({ method: 'POST', url, headers: { 'x-api-key': SHOP.key, 'content-type': 'text/plain' }, payload: '' });
    expect(without.statusCode).toBe(400);
    expect({ status: withType.statusCode, body: withType.json() }).toEqual({ status: without.statusCode, body: without.json() });
  });

  it('a text/plain body with bytes is still 415 (12bad68 kept)', async () => {
    const ep = await create();
    const res = await t.app.inject({ method: 'POST', url: `${BASE}${ep.id}/rotate-secret/`, headers: { 'x-api-key': SHOP.key, 'content-type': 'text/plain' }, payload: 'x' });
    expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 415, body: { error: 'unsupported content type: send application/json' } });
  });

  it('over a real keep-alive connection, a refused text/plain body is not read as the next request', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string, path: string, headers: Record<string, string>, body?: string) =>
      new Promise<{ status: number; body: string; socket: unknown }>((ok, fail) => {
        const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent }, (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (c) => (text += c)).on('end', () => ok({ status: res.statusCode!, body: text, socket: req.socket }));
        });
        req.on('error', fail);
        req.end(body);
      });
    try {
      const refused = await send('POST', '/api/v1/external/contacts/upsert/', { 'x-api-key': SHOP.key, 'content-type': 'text/plain' }, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      expect([refused.status, JSON.parse(refused.body)]).toEqual([415, { error: 'unsupported content type: send application/json' }]);
      const next = await send('GET', '/healthz', {});
      expect([next.status, next.body]).toEqual([200, '{"status":"ok"}']);
    } finally {
      agent.destroy();
    }
  });
});
