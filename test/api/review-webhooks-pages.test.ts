import { seedFixture } from '../../src/commands/provisioning/seed';
import { queueDeliveries } from '../../src/projections/webhooks/deliveries';
import { createTestApp } from '../support/services';
import { SHOP, sendsFixture } from '../support/sends';

// Review of client webhooks (issue #15): the deliveries page's links past its end (docs/webhooks.md: `previous` is
// "null once no newer attempt is logged"), on the real app and Postgres.

const BASE = '/api/v1/webhook-endpoints/';

describe('review: the deliveries page past its end', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(() => t?.close());

  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': SHOP.key } });
  const create = async () =>
    (await t.app.inject({ method: 'POST', url: BASE, headers: { 'x-api-key': SHOP.key }, payload: { url: 'https://hooks.example/in', event_types: ['message.sent'] } })).json() as { id: string };
  /** `n` attempts logged, one per delivery */
  const attempts = async (endpointId: string, n: number) => {
    const now = new Date();
    const { queued } = await queueDeliveries(t.db.pool, Array.from({ length: n }, (_, i) => ({
      endpointId, companyId: SHOP.companyId, webhookId: `msg_review_page_${endpointId}_${i}`, eventType: 'message.sent', payload: '{}',
    })), now);
    for (const id of queued) {
      await t.db.pool.query(`INSERT INTO webhooks.attempts (delivery_id, endpoint_id, attempted_at, status_code, latency_ms, error, next_retry_at)
        VALUES ($1, $2, $3, 500, 12, 'HTTP 500', $3)`, [id, endpointId, now]);
    }
  };
  const path = (link: string) => link.replace(/^https?:\/\/[^/]+/, '');

  it('an endpoint with no attempt: a page far past the end has no previous page', async () => {
    const ep = await create();
    const res = await get(`${BASE}${ep.id}/deliveries/?page=99999999999`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ count: 0, next: null, previous: null, results: [] });
  });

  it('a page far past the end links back to the last page, not to the page before it', async () => {
    const ep = await create();
    await attempts(ep.id, 3);
    const past = (await get(`${BASE}${ep.id}/deliveries/?page=1000000&page_size=2`)).json();
    expect(past).toMatchObject({ count: 3, next: null, results: [] });
    const last = (await get(path(past.previous))).json();
    expect(last.results).toHaveLength(1); // the third attempt, the oldest
    const first = (await get(path(last.previous))).json();
    expect(first.results).toHaveLength(2);
    expect(first.previous).toBeNull();
  });
});
