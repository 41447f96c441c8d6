import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { RETRY_SCHEDULE_MS } from '../../src/workers/webhook-schedule';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, sendsFixture, waitUntil } from '../support/sends';
import { createTestApp } from '../support/services';

// docs/webhooks.md's examples, as a client developer reads them: the signature snippet ("Verifying a signature"),
// taken from the docs file as written, verifies a real delivery from the real sender over real HTTP on 127.0.0.1
// (express's two calls it makes are stood in for: express is not a dependency of this project); the prose formula
// gives the same signature; a rotation's two signatures verify under either secret; the documented answers of
// `test/` and `rotate-secret/` and the request's headers are what the service sends; the retry schedule's sum is
// what the docs say.

const DOCS = readFileSync(join(__dirname, '../../docs/webhooks.md'), 'utf8');
const BASE = '/api/v1/webhook-endpoints/';

/** The ```js block under "## Verifying a signature (Node)". */
function docsSnippet(): string {
  const section = DOCS.slice(DOCS.indexOf('## Verifying a signature (Node)'));
  const m = /```js\n([\s\S]*?)```/.exec(section);
  if (!m) throw new Error('no js snippet in docs/webhooks.md');
  return m[1];
}

interface Answered { status: number; error?: string; event?: unknown; headers: IncomingHttpHeaders; body: string }

/**
 * Runs the docs snippet, as written, with `secret` as SWITCHBOARD_WEBHOOK_SECRET, behind a real HTTP server on
 * 127.0.0.1: express() and express.raw() are stood in for by a raw Buffer body and `res.sendStatus`; a throw is the
 * error express would answer (500).
 */
async function runSnippet(secret: string) {
  const code = docsSnippet();
  const imports = code.split('\n').filter((l) => l.startsWith('import '));
  expect(imports).toEqual(["import express from 'express';", "import { Webhook } from 'standardwebhooks';"]);
  const body = code.split('\n').filter((l) => !l.startsWith('import ')).join('\n');
  const routes = new Map<string, { raw: { type: string }; handler: (req: unknown, res: unknown) => void }>();
  const express = Object.assign(() => ({
    post: (path: string, raw: { type: string }, handler: (req: unknown, res: unknown) => void) => { routes.set(path, { raw, handler }); },
  }), { raw: (options: { type: string }) => options });
  new Function('express', 'Webhook', 'process', body)(express, Webhook, { env: { SWITCHBOARD_WEBHOOK_SECRET: secret } });
  const route = routes.get('/hooks');
  if (!route) throw new Error('the snippet registers no /hooks route');
  expect(route.raw).toEqual({ type: 'application/json' });
  const answered: Answered[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const a: Answered = { status: 0, headers: req.headers, body: raw.toString('utf8') };
      try {
        expect(req.headers['content-type']).toBe(route.raw.type);
        route.handler({ body: raw, headers: req.headers }, { sendStatus: (s: number) => { a.status = s; } });
        // what the handler verified, for the test to compare (the snippet keeps `event` to itself)
        a.event = new Webhook(secret).verify(a.body, req.headers as Record<string, string>);
      } catch (e) {
        a.status = 500;
        a.error = String(e);
      }
      answered.push(a);
      res.writeHead(a.status).end();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    answered,
    close: () => new Promise<void>((ok) => { server.closeAllConnections(); server.close(() => ok()); }),
  };
}

describe('docs/webhooks.md examples against the service', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let sender: { stop(): Promise<void> };
  const closers: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    sender = startWebhookSender(t.services, { pollMs: 20 });
  });
  afterAll(async () => {
    await sender?.stop();
    for (const c of closers) await c();
    await t?.close();
  });

  const api = (method: 'POST' | 'GET' | 'PATCH', url: string, payload?: object) =>
    t.app.inject({ method, url, headers: { 'x-api-key': SHOP.key }, ...(payload ? { payload } : {}) });

  it('the signature snippet, as written, verifies a real delivery; the prose formula gives the same signature', async () => {
    const ep = await api('POST', BASE, { url: 'http://127.0.0.1:1/hooks', event_types: ['message.sent'] });
    expect(ep.statusCode).toBe(201);
    const { id, secret: epSecret } = ep.json() as { id: string; secret: string };
    expect(epSecret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    const snippet = await runSnippet(epSecret);
    closers.push(snippet.close);
    const moveTo = async (url: string) => expect((await api('PATCH', `${BASE}${id}/`, { url })).statusCode).toBe(200);
    await moveTo(snippet.url);

    const test = await api('POST', `${BASE}${id}/test/`);
    expect(test.statusCode).toBe(202);
    const queued = test.json() as { delivery_id: string; webhook_id: string; status: string };
    expect(Object.keys(queued).sort()).toEqual(['delivery_id', 'status', 'webhook_id']);
    expect(queued.status).toBe('queued');
    expect(queued.webhook_id).toMatch(/^msg_/);

    const a = await waitUntil(async () => snippet.answered.find((x) => x.headers['webhook-id'] === queued.webhook_id), 20_000, 'the test event');
    expect(a.error).toBeUndefined();
    expect(a.status).toBe(204);
    expect(a.event).toEqual({ type: 'webhook.test', timestamp: expect.any(String), data: { endpoint_id: id, message: 'test event from Switchboard' } });
    // the request as "The request" shows it
    expect(a.headers['content-type']).toBe('application/json');
    expect(a.headers['user-agent']).toBe('Switchboard-Webhooks/1');
    expect(a.headers['webhook-timestamp']).toMatch(/^\d+$/);
    expect(a.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    // "v1, + base64 HMAC-SHA256 of {webhook-id}.{webhook-timestamp}.{body} keyed with the base64-decoded part after whsec_"
    const key = Buffer.from(epSecret.slice('whsec_'.length), 'base64');
    const mac = createHmac('sha256', key).update(`${a.headers['webhook-id']}.${a.headers['webhook-timestamp']}.${a.body}`).digest('base64');
    expect(a.headers['webhook-signature']).toBe(`v1,${mac}`);

    // the snippet with another secret throws (express would answer 500)
    const wrong = await runSnippet(`whsec_${Buffer.alloc(24, 7).toString('base64')}`);
    closers.push(wrong.close);
    await moveTo(wrong.url);
    const test2 = (await api('POST', `${BASE}${id}/test/`)).json() as { webhook_id: string };
    const w = await waitUntil(async () => wrong.answered.find((x) => x.headers['webhook-id'] === test2.webhook_id), 20_000, 'the wrong-secret attempt');
    expect(w.status).toBe(500);
    expect(w.error).toMatch(/No matching signature found/);

    // rotate-secret: 200 with the endpoint and its new secret; two signatures, each secret verifies with the snippet
    const rotated = await api('POST', `${BASE}${id}/rotate-secret/`);
    expect(rotated.statusCode).toBe(200);
    const r = rotated.json() as Record<string, unknown>;
    expect(Object.keys(r).sort()).toEqual(['created_at', 'description', 'disabled_reason', 'enabled', 'event_types', 'id', 'secret', 'updated_at', 'url']);
    const byNew = await runSnippet(r.secret as string);
    closers.push(byNew.close);
    await moveTo(byNew.url);
    const test3 = (await api('POST', `${BASE}${id}/test/`)).json() as { webhook_id: string };
    const n = await waitUntil(async () => byNew.answered.find((x) => x.headers['webhook-id'] === test3.webhook_id), 20_000, 'the rotated delivery');
    expect(n.status).toBe(204);
    expect((n.headers['webhook-signature'] as string).split(' ')).toHaveLength(2);
    expect(() => new Webhook(epSecret).verify(n.body, n.headers as Record<string, string>)).not.toThrow();
  }, 45_000);

  it('the retry schedule is the one written, and its sum before jitter is what the docs say', () => {
    const fmt = (ms: number) => (ms < 60_000 ? `${ms / 1000} s` : ms < 3_600_000 ? `${ms / 60_000} min` : `${ms / 3_600_000} h`);
    expect(DOCS).toContain(`the next attempt waits ${RETRY_SCHEDULE_MS.slice(0, 11).map(fmt).join(', ')},\n  ${RETRY_SCHEDULE_MS.slice(11).map(fmt).join(', ')} (each ±20 % jitter)`);
    expect(DOCS).toContain(`${RETRY_SCHEDULE_MS.length + 1} attempts over about 3 days`);
    const total = RETRY_SCHEDULE_MS.reduce((s, x) => s + x, 0);
    const min = Math.round(total / 60_000);
    const written = `${Math.floor(min / 1440)} d ${Math.floor((min % 1440) / 60)} h ${min % 60} min before jitter`;
    expect(written).toBe('2 d 23 h 43 min before jitter');
    const match = /15 attempts over about 3 days \((\d+ d \d+ h \d+ min before jitter)/.exec(DOCS);
    expect(match?.[1]).toBe(written);
  });
});
