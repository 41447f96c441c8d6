import { startWebhookSender } from '../../src/workers/webhook-sender';
import { OTHER, SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// Recovery after an outage longer than the retry schedule (docs/webhooks.md, "Recovering failed deliveries"), on real
// Postgres and a real receiver: POST .../recover/ queues again the deliveries that failed in a time range, and
// only those; the sender then delivers them.

const BASE = '/api/v1/webhook-endpoints/';
const HOUR_MS = 3_600_000;

describe('recovering failed webhook deliveries', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, receiver, register, queue } = bed));

  const recover = (endpointId: string, body: unknown, key = SHOP.key) =>
    t.app.inject({ method: 'POST', url: `${BASE}${endpointId}/recover/`, headers: { 'x-api-key': key }, payload: body as object });
  const statuses = async (endpointIds: string[]) =>
    Object.fromEntries((await t.db.pool.query<{ webhook_id: string; status: string }>(
      'SELECT webhook_id, status FROM webhooks.deliveries WHERE endpoint_id = ANY($1)', [endpointIds],
    )).rows.map((r) => [r.webhook_id, r.status]));
  /** runs a sender without retries (a failed attempt is the last) until `done` */
  const send = async (done: () => Promise<boolean>, what: string) => {
    const sender = startWebhookSender(t.services, { pollMs: 10, schedule: [] });
    try {
      await waitUntil(async () => (await done()) || undefined, 10_000, what);
    } finally {
      await sender.stop();
    }
  };
  const isoAgo = (ms: number) => new Date(t.services.now().getTime() - ms).toISOString();

  it('queues again the deliveries that failed in the range, and only those; the sender delivers them', async () => {
    const down = await register('/down');
    const other = await register('/other');
    receiver.respond((r) => (r.path === '/down' || r.path === '/other' ? 503 : 204));
    await queue(down.id, 3, 'down');
    await queue(other.id, 1, 'other');
    await send(async () => Object.values(await statuses([down.id, other.id])).every((s) => s === 'failed'), 'every delivery failed');
    // down0 failed two days ago: before the range
    await t.db.pool.query(`UPDATE webhooks.deliveries SET completed_at = $2 WHERE webhook_id = $1`, ['msg_down0', new Date(t.services.now().getTime() - 48 * HOUR_MS)]);
    receiver.respond(() => 204);
    await queue(down.id, 1, 'fine');
    await send(async () => (await statuses([down.id])).msg_fine0 === 'succeeded', 'a later delivery succeeded');

    const res = await recover(down.id, { since: isoAgo(24 * HOUR_MS) });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ requeued: 2, has_more: false });
    expect(await statuses([down.id, other.id])).toEqual({
      msg_down0: 'failed', msg_down1: 'pending', msg_down2: 'pending', msg_fine0: 'succeeded', msg_other0: 'failed',
    });

    const before = receiver.received.length;
    await send(async () => (await statuses([down.id])).msg_down2 === 'succeeded' && (await statuses([down.id])).msg_down1 === 'succeeded', 'the recovered deliveries');
    expect(receiver.received.slice(before).map((r) => r.headers['webhook-id']).sort()).toEqual(['msg_down1', 'msg_down2']);
    // a second call finds nothing failed in the range any more
    expect((await recover(down.id, { since: isoAgo(24 * HOUR_MS) })).json()).toEqual({ requeued: 0, has_more: false });
  });

  it('takes `until`, and refuses a malformed range, another company and unknown endpoints as the other routes do', async () => {
    const ep = await register('/range');
    receiver.respond(() => 500);
    await queue(ep.id, 1, 'range');
    await send(async () => (await statuses([ep.id])).msg_range0 === 'failed', 'the delivery failed');
    expect((await recover(ep.id, { since: isoAgo(HOUR_MS), until: isoAgo(HOUR_MS / 2) })).json()).toEqual({ requeued: 0, has_more: false });

    const refusals = [
      [{}, 'since must be an ISO 8601 date-time'],
      [{ since: 'yesterday' }, 'since must be an ISO 8601 date-time'],
      [{ since: '2026-03-01T10:00:00' }, 'since must be an ISO 8601 date-time'], // no time zone
      [{ since: isoAgo(HOUR_MS), until: isoAgo(2 * HOUR_MS) }, 'until must be later than since'],
      [{ since: isoAgo(HOUR_MS), status: 'failed' }, 'Unrecognized key: "status"'],
    ] as const;
    for (const [body, message] of refusals) {
      const res = await recover(ep.id, body);
      expect({ body, status: res.statusCode, error: typeof res.json().error }).toEqual({ body, status: 400, error: 'string' });
      expect(res.json().error).toContain(message);
    }
    for (const [id, key] of [[ep.id, OTHER.key], ['00000000-0000-4000-8000-000000000000', SHOP.key], ['not-a-uuid', SHOP.key]]) {
      const res = await recover(id, { since: isoAgo(HOUR_MS) }, key);
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 404, body: { error: 'webhook endpoint not found' } });
    }
    expect(await statuses([ep.id])).toEqual({ msg_range0: 'failed' }); // nothing refused changed anything
  });

  it('queues at most 100,000 a call, in short statements, and sets them aside while the endpoint is disabled', async () => {
    const ep = await register('/many');
    const disabled = await t.app.inject({ method: 'PATCH', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key }, payload: { enabled: false } });
    expect(disabled.statusCode).toBe(200);
    const failedAt = new Date(t.services.now().getTime() - HOUR_MS);
    await t.db.pool.query(
      `INSERT INTO webhooks.deliveries (delivery_id, endpoint_id, company_id, webhook_id, event_type, payload, status, attempts, next_attempt_at, created_at, completed_at)
       SELECT gen_random_uuid(), $1, $2, 'msg_many' || i, 'message.sent', '{}', 'failed', 15, NULL, $3, $3 FROM generate_series(1, 100001) i`,
      [ep.id, SHOP.companyId, failedAt],
    );
    expect((await recover(ep.id, { since: isoAgo(2 * HOUR_MS) })).json()).toEqual({ requeued: 100_000, has_more: true });
    expect((await recover(ep.id, { since: isoAgo(2 * HOUR_MS) })).json()).toEqual({ requeued: 1, has_more: false });
    const left = await t.db.pool.query<{ status: string; due: boolean; n: number }>(
      'SELECT status, next_attempt_at IS NOT NULL AS due, count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 GROUP BY 1, 2', [ep.id],
    );
    expect(left.rows).toEqual([{ status: 'pending', due: false, n: 100_001 }]);
  });
});
