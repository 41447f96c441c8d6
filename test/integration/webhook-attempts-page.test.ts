import { recordAttempts } from '../../src/projections/webhooks/deliveries';
import { SHOP } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// GET /api/v1/webhook-endpoints/{id}/deliveries/ over a real attempt log (docs/webhooks.md, "Endpoints API"):
// `next` continues with `before` (the page's last attempt), so following it neither repeats nor skips attempts
// while new ones arrive; `count` is kept by the log's triggers (migration 0009) and equals a count of the log.

const BASE = '/api/v1/webhook-endpoints/';

type Page = { count: number; next: string | null; previous: string | null; results: Array<{ id: number; webhook_id: string }> };

describe('webhook attempts page', () => {
  let t: WebhookTestBed['t'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, register, queue } = bed));

  /** queues `n` deliveries and logs one attempt for each, oldest first (the sender's own statement) */
  const attempt = async (endpointId: string, n: number, prefix: string) => {
    const { queued } = await queue(endpointId, n, prefix);
    const now = t.services.now();
    for (const deliveryId of queued) {
      await recordAttempts(t.db.pool, [{ deliveryId, endpointId, status: 'succeeded', attempts: 1, attemptedAt: now, statusCode: 204, latencyMs: 3, error: null, nextAt: null }],
        { recovered: [], failing: [] }, now, new Date(0));
    }
  };
  /** a link without its origin (inject answers as host localhost:80) */
  const rel = (url: string | null) => url && url.replace(/^http:\/\/localhost:80(?=\/)/, '');
  const get = async (url: string) => {
    const res = await t.app.inject({ method: 'GET', url: url.replace(/^https?:\/\/[^/]+/, ''), headers: { 'x-api-key': SHOP.key } });
    return { status: res.statusCode, body: res.json() as Page };
  };
  const countsMatchTheLog = async () => {
    const { rows } = await t.db.pool.query<{ endpoint_id: string; kept: string; counted: string }>(
      `SELECT coalesce(c.endpoint_id, l.endpoint_id) AS endpoint_id, coalesce(c.attempts, 0)::text AS kept, coalesce(l.n, 0)::text AS counted
         FROM webhooks.attempt_counts c FULL JOIN (SELECT endpoint_id, count(*) AS n FROM webhooks.attempts GROUP BY 1) l ON l.endpoint_id = c.endpoint_id`);
    return rows.filter((r) => r.kept !== r.counted);
  };

  it('follows next with before and previous with after: every attempt once, newest first, the same pages back, while new attempts arrive', async () => {
    const ep = await register('/paged');
    await attempt(ep.id, 25, 'paged');
    const first = await get(`${BASE}${ep.id}/deliveries/?page_size=10`);
    expect(first.status).toBe(200);
    expect(first.body.count).toBe(25);
    expect(first.body.previous).toBeNull();
    const ids = first.body.results.map((r) => r.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(rel(first.body.next)).toBe(`${BASE}${ep.id}/deliveries/?page_size=10&page=2&before=${ids[9]}`);

    await attempt(ep.id, 5, 'newer'); // arrive between two pages: at the front, not pushing older ones onto page 2
    const second = await get(first.body.next!);
    expect(second.body.count).toBe(30);
    expect(second.body.results.map((r) => r.webhook_id)).toEqual(Array.from({ length: 10 }, (_, i) => `msg_paged${14 - i}`));
    expect(rel(second.body.previous)).toBe(`${BASE}${ep.id}/deliveries/?page_size=10&after=${second.body.results[0].id}`);
    const third = await get(second.body.next!);
    expect(third.body.results.map((r) => r.webhook_id)).toEqual(['msg_paged4', 'msg_paged3', 'msg_paged2', 'msg_paged1', 'msg_paged0']);
    expect(third.body.next).toBeNull();
    expect(rel(third.body.previous)).toBe(`${BASE}${ep.id}/deliveries/?page_size=10&page=2&after=${third.body.results[0].id}`);
    const seen = [...first.body.results, ...second.body.results, ...third.body.results].map((r) => r.webhook_id);
    expect(new Set(seen).size).toBe(25);

    // back with previous (after): the same pages, not shifted by the 5 that arrived; then those 5, and no further
    const backToSecond = await get(third.body.previous!);
    expect(backToSecond.body).toEqual(second.body);
    const backToFirst = await get(second.body.previous!);
    expect(backToFirst.body.results).toEqual(first.body.results);
    expect(rel(backToFirst.body.next)).toBe(`${BASE}${ep.id}/deliveries/?page_size=10&page=2&before=${ids[9]}`);
    const newest = await get(backToFirst.body.previous!);
    expect(newest.body.results.map((r) => r.webhook_id)).toEqual(['msg_newer4', 'msg_newer3', 'msg_newer2', 'msg_newer1', 'msg_newer0']);
    expect(newest.body.previous).toBeNull();
    expect((await get(newest.body.next!)).body.results).toEqual(first.body.results);
    const pastTheNewest = await get(`${BASE}${ep.id}/deliveries/?page_size=10&after=${newest.body.results[0].id}`);
    expect(pastTheNewest.body.results).toEqual([]);
    expect(pastTheNewest.body.previous).toBeNull();
    expect((await get(pastTheNewest.body.next!)).body.results.map((r) => r.webhook_id)).toEqual([...newest.body.results, ...first.body.results.slice(0, 5)].map((r) => r.webhook_id));

    // by page number, as before: the newest 10 now include the 5 that arrived
    const byPage = await get(`${BASE}${ep.id}/deliveries/?page_size=10&page=3`);
    expect(byPage.body.results.map((r) => r.webhook_id)).toEqual(Array.from({ length: 10 }, (_, i) => `msg_paged${9 - i}`));
  });

  it('refuses a before or after that is not an attempt id, and both at once, in the error shape, and counts only this endpoint', async () => {
    const ep = await register('/bad-before');
    for (const before of ['abc', '0', '-3', '1.5', '99999999999999999999']) {
      const res = await get(`${BASE}${ep.id}/deliveries/?before=${before}`);
      expect([res.status, res.body]).toEqual([400, { error: 'before: must be an attempt id (a positive integer)' }]);
    }
    for (const after of ['abc', '0', '1e3']) {
      const res = await get(`${BASE}${ep.id}/deliveries/?after=${after}`);
      expect([res.status, res.body]).toEqual([400, { error: 'after: must be an attempt id (a positive integer)' }]);
    }
    const both = await get(`${BASE}${ep.id}/deliveries/?before=9&after=3`);
    expect([both.status, both.body]).toEqual([400, { error: 'after: before and after cannot be used together' }]);
    expect((await get(`${BASE}${ep.id}/deliveries/?after=1`)).body).toEqual({ count: 0, next: null, previous: null, results: [] });
    const empty = await get(`${BASE}${ep.id}/deliveries/?before=1`);
    expect(empty.body).toEqual({ count: 0, next: null, previous: null, results: [] });
  });

  it("keeps every endpoint's count equal to a count of the log through inserts of many endpoints at once and deletes", async () => {
    const a = await register('/count-a');
    const b = await register('/count-b');
    await attempt(a.id, 3, 'ca');
    const { queued } = await queue(b.id, 4, 'cb');
    const now = t.services.now();
    // one statement logging attempts of two endpoints
    const both = [...queued.map((deliveryId) => ({ deliveryId, endpointId: b.id })), { deliveryId: queued[0], endpointId: a.id }];
    await recordAttempts(t.db.pool, both.map((x) => ({ ...x, status: 'pending' as const, attempts: 1, attemptedAt: now, statusCode: 500, latencyMs: 3, error: 'HTTP 500', nextAt: now })),
      { recovered: [], failing: [] }, now, new Date(0));
    expect(await countsMatchTheLog()).toEqual([]);
    expect((await get(`${BASE}${b.id}/deliveries/`)).body.count).toBe(4);
    await t.db.pool.query('DELETE FROM webhooks.attempts WHERE attempt_id IN (SELECT attempt_id FROM webhooks.attempts WHERE endpoint_id = ANY($1) ORDER BY attempt_id LIMIT 5)', [[a.id, b.id]]);
    expect(await countsMatchTheLog()).toEqual([]);
    expect((await get(`${BASE}${a.id}/deliveries/`)).body.count + (await get(`${BASE}${b.id}/deliveries/`)).body.count).toBe(3);
  });
});
