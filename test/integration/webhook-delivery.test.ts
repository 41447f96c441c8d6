import { Webhook } from 'standardwebhooks';
import { seedFixture } from '../../src/commands/provisioning/seed';
import type { Subscription } from '../../src/ports/transport';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { startWebhookFanOut } from '../../src/workers/webhook-fanout';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { guardedLookup, ForbiddenAddressError } from '../../src/adapters/webhooks/address-guard';
import { WebhookHttpClient } from '../../src/adapters/webhooks/http-client';
import { createTestApp } from '../support/services';
import { OTHER, postWebhook, SHOP, sendsFixture, statusBody, waitUntil } from '../support/sends';
import { startReceiver } from '../support/webhook-receiver';

// Client webhooks end to end (docs/webhooks.md): real app, Postgres, delivery consumer, fan-out and sender, and a
// real HTTP receiver on 127.0.0.1 (allowed by the operator settings). Retry waits are shortened to milliseconds.

const BASE = '/api/v1/webhook-endpoints/';
const T0 = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';

describe('webhook delivery to a real receiver', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let consumer: Subscription;
  let workers: Array<{ stop(): Promise<void> }>;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    consumer = await startDeliveryConsumer(t.services, { ownerGraceMs: 300, ownerWaitMs: 50 });
    workers = [
      startWebhookFanOut(t.services, { gatherMs: 5, pollMs: 50 }),
      startWebhookSender(t.services, { pollMs: 20, schedule: [30, 60, 120, 240, 480, 960], random: () => 0.5 }),
    ];
    receiver = await startReceiver();
  });
  afterAll(async () => {
    for (const w of workers ?? []) await w.stop();
    await consumer?.stop();
    await receiver?.close();
    await t?.close();
  });
  beforeEach(() => {
    receiver.received.length = 0;
    receiver.respond(() => 204);
  });

  const api = (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown, key = SHOP.key) =>
    t.app.inject({ method, url, headers: { 'x-api-key': key }, ...(body === undefined ? {} : { payload: body as object }) });
  const register = async (eventTypes: string[], path: string, key = SHOP.key) => {
    const res = await api('POST', BASE, { url: receiver.url(path), event_types: eventTypes }, key);
    expect(res.statusCode).toBe(201);
    return res.json() as { id: string; secret: string };
  };
  const sendWelcome = async (recipient: string) => {
    const res = await api('POST', '/api/v1/platform-templates/send/', { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: recipient });
    expect(res.statusCode).toBe(200);
    return res.json().message_id as string;
  };
  const status = async (id: string, s: 'sent' | 'delivered' | 'read' | 'failed', at: string) =>
    expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, id, s, at))).statusCode).toBe(200);
  const bodiesFor = (messageId: string, path?: string) =>
    receiver.received.filter((r) => path === undefined || r.path === path).map((r) => JSON.parse(r.body)).filter((b) => b.data?.meta_message_id === messageId);

  it('signs with Standard Webhooks; an out-of-order provider stream gives the monotonic transitions of the status record', async () => {
    const ep = await register(['message.sent', 'message.delivered', 'message.read', 'message.failed'], '/ordered');
    const id = await sendWelcome('+5491155551234'); // the shop's contact, stored under a variant of this number
    for (const [s, when] of [['read', T2], ['delivered', T1], ['sent', T0], ['read', T2]] as const) await status(id, s, when);
    await waitUntil(async () => bodiesFor(id).length >= 3, 20_000, 'three webhooks');
    await new Promise((r) => setTimeout(r, 300)); // nothing more arrives
    const bodies = bodiesFor(id, '/ordered');
    expect(bodies.map((b) => [b.type, b.data.delivery_status.current])).toEqual([['message.sent', 'sent'], ['message.delivered', 'delivered'], ['message.read', 'read']]);

    const record = (await api('GET', `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`)).json();
    const sentAt = record.delivery_status.sent_at;
    expect(record.recipient).toEqual({ phone: '+5491155551234', contact_name: SHOP.contact.fullName, contact_id: SHOP.contact.id });
    expect(bodies[2]).toEqual({ type: 'message.read', timestamp: expect.any(String), data: record });
    expect(bodies[1].data.delivery_status).toEqual({ current: 'delivered', sent_at: sentAt, delivered_at: T2, read_at: null, failed_at: null, error_code: null, error_message: null });
    expect(bodies[0].data).toEqual({ ...record, delivery_status: { current: 'sent', sent_at: sentAt, delivered_at: null, read_at: null, failed_at: null, error_code: null, error_message: null } });

    const wh = new Webhook(ep.secret);
    for (const r of receiver.received.filter((x) => x.path === '/ordered')) {
      expect(r.headers['webhook-id']).toMatch(/^msg_/);
      expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
      expect(wh.verify(r.body, r.headers as Record<string, string>)).toEqual(JSON.parse(r.body));
    }
    expect(() => new Webhook('whsec_' + Buffer.from('another secret 24 bytes!').toString('base64')).verify(receiver.received[0].body, receiver.received[0].headers as Record<string, string>)).toThrow();
  });

  it('after a rotation both secrets sign (two signatures), each verifies', async () => {
    const ep = await register(['message.sent'], '/rotated');
    const rotated = (await api('POST', `${BASE}${ep.id}/rotate-secret/`)).json();
    const id = await sendWelcome('+5491155550302');
    await waitUntil(async () => bodiesFor(id, '/rotated').length === 1, 20_000, 'the webhook');
    const r = receiver.received.find((x) => x.path === '/rotated')!;
    expect(String(r.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const secret of [ep.secret, rotated.secret]) expect(new Webhook(secret).verify(r.body, r.headers as Record<string, string>)).toMatchObject({ type: 'message.sent' });
  });

  it('rotated several times within 24 h, every secret still in its 24 h signs (at most five); the oldest past that stops', async () => {
    const ep = await register(['message.sent'], '/rotated-often');
    const secrets = [ep.secret];
    for (let i = 0; i < 5; i++) secrets.push((await api('POST', `${BASE}${ep.id}/rotate-secret/`)).json().secret);
    const id = await sendWelcome('+5491155550303');
    await waitUntil(async () => bodiesFor(id, '/rotated-often').length === 1, 20_000, 'the webhook');
    const r = receiver.received.find((x) => x.path === '/rotated-often')!;
    expect(String(r.headers['webhook-signature']).split(' ')).toHaveLength(5);
    const verifies = (secret: string) => {
      try {
        new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
        return true;
      } catch {
        return false;
      }
    };
    expect(secrets.map(verifies)).toEqual([false, true, true, true, true, true]);
  });

  it("tenant isolation: an endpoint receives only its own company's events", async () => {
    await register(['message.sent'], '/shop');
    await register(['message.sent', 'message.delivered', 'message.read', 'message.failed', 'bulk_send.started', 'bulk_send.completed', 'contact.upserted'], '/other', OTHER.key);
    const id = await sendWelcome('+5491155550303');
    await waitUntil(async () => bodiesFor(id, '/shop').length >= 1, 20_000, 'the shop webhook');
    const test = await api('POST', `${BASE}${(await register(['message.sent'], '/marker')).id}/test/`);
    expect(test.statusCode).toBe(202);
    await waitUntil(async () => receiver.received.some((r) => JSON.parse(r.body).type === 'webhook.test'), 20_000, 'the marker');
    expect(receiver.received.filter((r) => r.path === '/other')).toEqual([]);
    const otherPaths = await t.db.pool.query(
      `SELECT count(*)::int AS n FROM webhooks.deliveries d JOIN rm_webhooks.endpoints e USING (endpoint_id) WHERE e.company_id = $1`, [OTHER.companyId]);
    expect(otherPaths.rows[0].n).toBe(0);
  });

  it('receiver down for a while then up: every event arrives, 0 lost; the attempts are listed with status code and next retry', async () => {
    const ep = await register(['message.sent'], '/flaky');
    // down for each event's first two attempts, then up
    const failures = new Map<string, number>();
    receiver.respond((r) => {
      if (r.path !== '/flaky') return 204;
      const id = String(r.headers['webhook-id']);
      const n = failures.get(id) ?? 0;
      if (n >= 2) return 204;
      failures.set(id, n + 1);
      return 503;
    });
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await sendWelcome(`+54911555504${String(i).padStart(2, '0')}`));
    await waitUntil(async () => ids.every((id) => bodiesFor(id, '/flaky').length >= 1), 30_000, 'every event');
    expect([...failures.values()]).toEqual(new Array(20).fill(2));
    const ids2 = new Set(receiver.received.filter((r) => r.path === '/flaky').map((r) => r.headers['webhook-id']));
    expect(ids2.size).toBe(20);
    // the last attempts are recorded just after the receiver answered them
    const page = await waitUntil(async () => {
      const p = (await api('GET', `${BASE}${ep.id}/deliveries/?page_size=100`)).json();
      return p.count === 60 && p;
    }, 20_000, 'the 60 attempts listed');
    const failed = page.results.find((a: any) => a.status_code === 503);
    expect(failed).toEqual({
      id: expect.any(Number), delivery_id: expect.any(String), webhook_id: expect.stringMatching(/^msg_/), event_type: 'message.sent',
      attempted_at: expect.any(String), status_code: 503, latency_ms: expect.any(Number), error: 'HTTP 503', next_retry_at: expect.any(String), delivery_status: 'succeeded',
    });
    expect(page.results[0]).toMatchObject({ status_code: 204, error: null, next_retry_at: null, delivery_status: 'succeeded' });
  });

  it('an exhausted schedule marks the delivery failed; a retry queues it again', async () => {
    const ep = await register(['message.sent'], '/down');
    receiver.respond((r) => (r.path === '/down' ? 500 : 204));
    const id = await sendWelcome('+5491155550305');
    const failed = await waitUntil(async () => {
      const r = await t.db.pool.query(`SELECT delivery_id, status, attempts FROM webhooks.deliveries WHERE endpoint_id = $1 AND status = 'failed'`, [ep.id]);
      return r.rows[0];
    }, 30_000, 'a failed delivery');
    expect(failed.attempts).toBe(7); // the first attempt and six retries
    const attempts = (await api('GET', `${BASE}${ep.id}/deliveries/`)).json();
    expect(attempts.count).toBe(7);
    expect(attempts.results[0]).toMatchObject({ status_code: 500, next_retry_at: null, delivery_status: 'failed' });
    receiver.respond(() => 204);
    expect((await api('POST', `${BASE}${ep.id}/deliveries/${failed.delivery_id}/retry/`)).statusCode).toBe(202);
    await waitUntil(async () => bodiesFor(id, '/down').length >= 1, 20_000, 'the retried delivery');
  });

  it('410 disables the endpoint', async () => {
    const ep = await register(['message.sent'], '/gone');
    receiver.respond((r) => (r.path === '/gone' ? 410 : 204));
    await sendWelcome('+5491155550306');
    const shown = await waitUntil(async () => {
      const e = (await api('GET', `${BASE}${ep.id}/`)).json();
      return e.enabled === false && e;
    }, 20_000, 'the endpoint disabled');
    expect(shown).toMatchObject({ enabled: false, disabled_reason: 'gone' });
  });
});

describe('webhook address guard', () => {
  it('refuses a name that resolves to loopback at connection time', async () => {
    const err = await new Promise<unknown>((resolve) => guardedLookup('localhost', {}, (e) => resolve(e)));
    expect(err).toBeInstanceOf(ForbiddenAddressError);
    const client = new WebhookHttpClient({ timeoutMs: 2000, maxBodyBytes: 1024, allowPrivate: false });
    const res = await client.post({ url: 'http://127.0.0.1:9/x', headers: {}, body: '{}' });
    expect(res).toMatchObject({ statusCode: null, failure: 'address_refused', error: '127.0.0.1 is a forbidden address' });
    client.close();
  });
});
