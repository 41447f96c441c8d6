import { purgeExpiredWebhookLog } from '../../src/workers/webhook-retention';
import { SHOP } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

const DAY_MS = 86_400_000;
const BASE = '/api/v1/webhook-endpoints/';

// Regression review 23b of bc31e01: the retention deletes a set-aside delivery once its event was queued more than
// WEBHOOKS_RETENTION_DAYS ago, but its attempts (logged after it was queued, in its retry schedule) were left to
// their own age: up to 3 days more, counted on the deliveries page but never listed (the page joins each attempt to
// its delivery). A page of only such attempts came back empty and without a `next` link: the older attempts of kept
// deliveries could not be reached. The purge now deletes the attempts of the attempted deliveries it deletes.

describe('regress-review23b: attempts of set-aside deliveries the retention deleted', () => {
  let t: WebhookTestBed['t'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, register, queue } = bed));

  const daysAgo = (days: number) => new Date(t.services.now().getTime() - days * DAY_MS);
  const get = async (url: string) => {
    const res = await t.app.inject({ method: 'GET', url, headers: { 'x-api-key': SHOP.key } });
    expect(res.statusCode).toBe(200);
    return res.json();
  };

  it('the deliveries page lists what it counts, and its next link reaches the older attempts', async () => {
    const endpoint = await register('/set-aside-attempts');
    await queue(endpoint.id, 1, 'young', daysAgo(29)); // kept: queued within the retention
    await queue(endpoint.id, 3, 'old', daysAgo(31)); // deleted: queued before it
    // attempts: the kept delivery's 28 days ago, then the old ones' 27 days ago (retried after it; within the retention)
    // (as the attempt recorder logs a failed attempt of a pending delivery: the attempt, and the delivery's count)
    const attempt = (webhookId: string, at: Date) => t.db.pool.query(
      `WITH d AS (UPDATE webhooks.deliveries SET attempts = attempts + 1 WHERE endpoint_id = $1 AND webhook_id = $2 RETURNING delivery_id, endpoint_id)
       INSERT INTO webhooks.attempts (delivery_id, endpoint_id, attempted_at, status_code, latency_ms, error, next_retry_at)
       SELECT delivery_id, endpoint_id, $3, 500, 10, NULL, NULL FROM d`,
      [endpoint.id, webhookId, at]);
    await attempt('msg_young0', daysAgo(28));
    for (const w of ['msg_old0', 'msg_old1', 'msg_old2']) await attempt(w, daysAgo(27));
    const res = await t.app.inject({ method: 'PATCH', url: `${BASE}${endpoint.id}/`, headers: { 'x-api-key': SHOP.key }, payload: { enabled: false } });
    expect(res.statusCode).toBe(200);

    const report = await purgeExpiredWebhookLog(t.services);
    expect(report.deliveries).toBe(3);
    expect((await t.db.pool.query('SELECT count(*)::int AS n FROM webhooks.attempts WHERE endpoint_id = $1', [endpoint.id])).rows[0].n).toBe(1);

    const first = await get(`${BASE}${endpoint.id}/deliveries/?page_size=2`);
    const seen = [...first.results];
    let next = first.next as string | null;
    while (next) {
      const page = await get(next.replace(/^https?:\/\/[^/]+/, ''));
      seen.push(...page.results);
      next = page.next;
    }
    expect(seen.map((a: { webhook_id: string }) => a.webhook_id)).toEqual(['msg_young0']);
    expect(first.count).toBe(seen.length);
  });
});
