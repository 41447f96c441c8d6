import { Writable } from 'node:stream';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { generateWebhookSecret, secretBox } from '../../src/commands/webhook-endpoint/secrets';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { metricSample } from '../support/metrics';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// An endpoint whose signing secret cannot be unsealed (sealed under another API_KEY_PEPPER, or damaged) gets failed
// attempts with a clear error on the normal schedule, seen on its deliveries page, in the metrics and the log; the
// sender goes on serving the other endpoints (docs/webhooks.md, "Delivery"). Before, each such delivery was posted
// nowhere and logged nowhere, due again only at its lease's end, for ever.

const BASE = '/api/v1/webhook-endpoints/';
const UNSEALABLE = 'endpoint secret cannot be unsealed (API_KEY_PEPPER changed?)';

type Page = { count: number; results: Array<{ webhook_id: string; status_code: number | null; error: string | null; next_retry_at: string | null; delivery_status: string }> };

describe('an endpoint secret that cannot be unsealed', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, receiver, register, queue } = bed));

  const setSecret = (endpointId: string, sealed: string) =>
    t.db.pool.query('UPDATE rm_webhooks.endpoints SET secret = $2 WHERE endpoint_id = $1', [endpointId, sealed]);
  const attemptsOf = async (endpointId: string) => (await t.db.pool.query<{ status_code: number | null; error: string; retry_in_an_hour: boolean | null; status: string; attempts: number }>(
    `SELECT a.status_code, a.error, a.next_retry_at - a.attempted_at BETWEEN interval '1 hour' AND interval '2 hours' AS retry_in_an_hour, d.status, d.attempts
       FROM webhooks.attempts a JOIN webhooks.deliveries d USING (delivery_id) WHERE a.endpoint_id = $1 ORDER BY a.attempt_id`, [endpointId])).rows;
  const outcomes = async (outcome: string) =>
    metricSample((await t.app.inject({ method: 'GET', url: '/metrics' })).body, `switchboard_webhook_attempts_total{outcome="${outcome}"}`);
  const logged: Array<{ msg: string; endpointId?: string }> = [];
  const logger = pino({ level: 'warn' }, new Writable({ write(line, _enc, done) { logged.push(JSON.parse(String(line))); done(); } }));

  it('sealed under another API_KEY_PEPPER: a failed attempt on the schedule, on the deliveries page; the other endpoint is served', async () => {
    const stuck = await register('/sealed-elsewhere');
    const fine = await register('/fine');
    await setSecret(stuck.id, secretBox('another-pepper-0123456789abcdef').seal(generateWebhookSecret()));
    await queue(stuck.id, 3, 'elsewhere');
    await queue(fine.id, 3, 'fine');
    const before = await outcomes('secret_unsealable');
    const sender = startWebhookSender({ ...t.services, logger }, { pollMs: 20, schedule: [3_600_000], random: () => 0.5 });
    try {
      await waitUntil(async () => (await attemptsOf(stuck.id)).length === 3, 20_000, 'the unsealable deliveries\' attempts');
      await waitUntil(async () => receiver.received.filter((r) => r.path === '/fine').length === 3, 20_000, 'the other endpoint\'s deliveries');
    } finally {
      await sender.stop();
    }
    // the schedule's first wait (an hour, no jitter here; from when the attempt was recorded), as after any failed
    // attempt; no request was made
    expect(await attemptsOf(stuck.id)).toEqual(Array(3).fill({ status_code: null, error: UNSEALABLE, retry_in_an_hour: true, status: 'pending', attempts: 1 }));
    expect(receiver.received.filter((r) => r.path === '/sealed-elsewhere')).toEqual([]);
    const page = await t.app.inject({ method: 'GET', url: `${BASE}${stuck.id}/deliveries/`, headers: { 'x-api-key': SHOP.key } });
    expect(page.statusCode).toBe(200);
    const body = page.json() as Page;
    expect(body.count).toBe(3);
    expect(body.results.map((r) => [r.status_code, r.error, r.delivery_status, r.next_retry_at !== null]))
      .toEqual(Array(3).fill([null, UNSEALABLE, 'pending', true]));
    expect(await outcomes('secret_unsealable')).toBe(before + 3);
    // the operator's line: once per secret and process, naming the endpoint
    expect(logged.filter((l) => l.endpointId === stuck.id).map((l) => l.msg)).toEqual([`webhook ${UNSEALABLE}`]);
  });

  it('damaged: the delivery fails when its schedule ends, like any other', async () => {
    const damaged = await register('/damaged');
    await setSecret(damaged.id, 'bm90IGEgc2VhbGVkIHNlY3JldA==');
    await queue(damaged.id, 2, 'damaged');
    const sender = startWebhookSender(t.services, { pollMs: 20, schedule: [] }); // one attempt, then failed
    try {
      await waitUntil(async () => (await attemptsOf(damaged.id)).length === 2, 20_000, 'the damaged secret\'s attempts');
    } finally {
      await sender.stop();
    }
    expect(await attemptsOf(damaged.id)).toEqual(Array(2).fill({ status_code: null, error: UNSEALABLE, retry_in_an_hour: null, status: 'failed', attempts: 1 }));
  });

  it('a rotation recovers it at once: the new secret signs alone while the unsealable one is still in its 24 h', async () => {
    const ep = await register('/rotated');
    await setSecret(ep.id, secretBox('another-pepper-0123456789abcdef').seal(generateWebhookSecret()));
    const rotated = await t.app.inject({ method: 'POST', url: `${BASE}${ep.id}/rotate-secret/`, headers: { 'x-api-key': SHOP.key } });
    expect(rotated.statusCode).toBe(200);
    const { secret } = rotated.json() as { secret: string };
    await queue(ep.id, 1, 'rotated');
    const sender = startWebhookSender(t.services, { pollMs: 20 });
    try {
      await waitUntil(async () => receiver.received.some((r) => r.path === '/rotated'), 20_000, 'the delivery, signed with the new secret');
    } finally {
      await sender.stop();
    }
    const [got] = receiver.received.filter((r) => r.path === '/rotated');
    expect(got.headers['webhook-signature']).toMatch(/^v1,[^ ]+$/); // one signature
    expect(() => new Webhook(secret).verify(got.body, got.headers as Record<string, string>)).not.toThrow();
  });
});
