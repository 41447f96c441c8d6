import { request as httpRequest } from 'node:http';
import { PROVIDER_WEBHOOK_TOPIC, signWebhook, statusWebhook } from '../../src/shared/provider-webhook';
import type { IncomingRecord } from '../../src/ports/transport';
import { createTestApp } from '../support/services';
import { APP_SECRET, VERIFY_TOKEN } from '../support/sends';

// Review 11: the provider webhook ingress over real HTTP: the signature header's exact format, the body limit,
// a body of many entries, the handshake.

type T = Awaited<ReturnType<typeof createTestApp>>;

interface Answer { status: number; body: string }

describe('POST /webhooks/provider over HTTP (review 11)', () => {
  let t: T;
  let port: number;
  const seen: IncomingRecord[] = [];

  beforeAll(async () => {
    t = await createTestApp();
    await t.services.transport.subscribe(PROVIDER_WEBHOOK_TOPIC, async (r) => { seen.push(r); }, { groupId: 'review11-spy' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });
  beforeEach(() => {
    seen.length = 0;
  });

  const post = (raw: Buffer | string, headers: Record<string, string>): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/webhooks/provider', headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString('utf8') }));
      });
      req.on('error', reject);
      req.end(raw);
    });
  const body = (n: number) => JSON.stringify(statusWebhook(Array.from({ length: n }, (_, i) => ({
    phoneNumberId: '109876543210001', providerMessageId: `wamid.R11-${i}`, status: 'delivered' as const, timestamp: '1772359205', recipientId: '5491155551234',
  }))));

  it('a signature header with anything after the 64 hex digits is refused (401), nothing published', async () => {
    const raw = body(1);
    const good = signWebhook(APP_SECRET, raw);
    for (const sig of [`${good}zz`, `${good}0`, `${good}00`, `${good}, sha256=${'0'.repeat(64)}`, `${good.slice(0, -1)}`, `sha256= ${good.slice(7)}`]) {
      const res = await post(raw, { 'content-type': 'application/json', 'x-hub-signature-256': sig });
      expect({ sig, status: res.status, body: JSON.parse(res.body) }).toEqual({ sig, status: 401, body: { error: 'invalid or missing X-Hub-Signature-256' } });
    }
    expect(seen).toHaveLength(0);
  });

  it('the exact signature is accepted, its hex digits in either case', async () => {
    const raw = body(1);
    const good = signWebhook(APP_SECRET, raw);
    for (const sig of [good, `sha256=${good.slice(7).toUpperCase()}`]) {
      const res = await post(raw, { 'content-type': 'application/json', 'x-hub-signature-256': sig });
      expect(res.status).toBe(200);
    }
    expect(seen).toHaveLength(2);
  });

  it('the signature is over the bytes as received (no re-serialisation): spacing and key order kept', async () => {
    const raw = `{ "object":"whatsapp_business_account",\n  "entry": [ {"changes":[{"value":{"metadata":{"phone_number_id":"1"},"statuses":[{"status":"read","id":"wamid.RAW"}]}}]} ] }`;
    const res = await post(raw, { 'content-type': 'application/json; charset=utf-8', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) });
    expect(res.status).toBe(200);
    expect(seen.map((r) => r.key)).toEqual(['wamid.RAW']);
  });

  it('a signed body without a content type is still taken', async () => {
    const raw = body(1);
    const res = await post(raw, { 'x-hub-signature-256': signWebhook(APP_SECRET, raw) });
    expect(res.status).toBe(200);
  });

  it('a body over the limit is refused with a 413 {error}, nothing published', async () => {
    const raw = Buffer.alloc(4 * 1024 * 1024 + 1, 0x20);
    const res = await post(raw, { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) });
    expect(res.status).toBe(413);
    expect(Object.keys(JSON.parse(res.body))).toEqual(['error']);
    expect(seen).toHaveLength(0);
  });

  it('a body of many entries is published whole before the 200', async () => {
    const raw = body(20_000);
    expect(raw.length).toBeLessThan(4 * 1024 * 1024);
    const res = await post(raw, { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) });
    expect({ status: res.status, body: JSON.parse(res.body) }).toEqual({ status: 200, body: { received: 20_000 } });
    expect(seen).toHaveLength(20_000);
  });

  it('GET handshake: the challenge only for the exact token', async () => {
    const get = async (qs: string) => {
      const res = await fetch(`http://127.0.0.1:${port}/webhooks/provider?${qs}`);
      return { status: res.status, body: await res.text() };
    };
    expect(await get(`hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=42`)).toEqual({ status: 200, body: '42' });
    for (const qs of [`hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}x&hub.challenge=42`, `hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=42`]) {
      expect((await get(qs)).status).toBe(403);
    }
  });
});
