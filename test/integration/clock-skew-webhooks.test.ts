import {
  CLAIM_DUE_DELIVERIES_SQL, CLAIM_DUE_PLAN_SETTING, claimDueDeliveries, queueDeliveries, requeueDelivery, resumeDeliveries, setDeliveriesAside,
} from '../../src/projections/webhooks/deliveries';
import { CLAIM_LEASE_MS } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// Clocks of several processes (docs/reliability.md, 2026-11-28): a claim of a client webhook delivery writes its lease
// (next_attempt_at and claimed_until) with the claiming sender's clock, and another sender, the retry and the
// resumption judged it with theirs. A sender more than the lease (60 s) ahead claimed and posted a delivery another
// sender was posting (a second post of one webhook id). A claimed delivery's lease now ends only when both the judging
// process's clock and Postgres's have passed it; a delivery never claimed is due by the claimer's clock alone.

const AHEAD_MS = 90_000; // more than the claim's lease
let bed: WebhookTestBed;
useWebhookTestBed((b) => { bed = b; });

const ahead = () => new Date(Date.now() + AHEAD_MS);
const claim = (now: Date, leaseMs = CLAIM_LEASE_MS) => claimDueDeliveries(bed.t.db.pool, now, 200, new Date(now.getTime() + leaseMs));
/** the deliveries of endpoint `endpointId` a claim took (a claim also takes those the tests before left due) */
const of = (endpointId: string, claimed: Array<{ endpoint_id: string; delivery_id: string }>) =>
  claimed.filter((d) => d.endpoint_id === endpointId).map((d) => d.delivery_id);
const row = async (deliveryId: string) =>
  (await bed.t.db.pool.query('SELECT next_attempt_at, claimed_until, retry_asked FROM webhooks.deliveries WHERE delivery_id = $1', [deliveryId])).rows[0];

it("a sender 90 s ahead does not claim a delivery another sender claimed (its 60-s lease running): it is posted once", async () => {
  const ep = await bed.register('/skew-claim');
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'skew-claim-');
  const first = await claim(new Date()); // the sender on time, posting it
  expect(first.map((d) => [d.delivery_id, d.webhook_id])).toEqual([[deliveryId, 'msg_skew-claim-0']]);
  // before: the sender ahead took it over (`[deliveryId]`), and posted msg_skew-claim-0 a second time
  expect(of(ep.id, await claim(ahead()))).toEqual([]);
  expect(of(ep.id, await claim(new Date()))).toEqual([]);
});

it("a lease that ended by both clocks (a sender that died) is taken over by the next claim", async () => {
  const ep = await bed.register('/skew-dead');
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'skew-dead-');
  const first = await claim(new Date(), 500); // a short lease, then nothing records or releases it
  expect(first.map((d) => d.delivery_id)).toEqual([deliveryId]);
  const taken = await waitUntil(async () => {
    const c = of(ep.id, await claim(new Date()));
    return c.length > 0 ? c : undefined;
  }, 20_000, 'the claim after the lease');
  expect(taken).toEqual([deliveryId]);
});

it("a delivery never claimed, queued by a fan-out 90 s ahead, is claimed at once by a sender of that clock (no wait for Postgres's)", async () => {
  const ep = await bed.register('/skew-fresh');
  const now = ahead();
  const { queued: [deliveryId] } = await queueDeliveries(bed.t.db.pool, [{
    endpointId: ep.id, companyId: SHOP.companyId, webhookId: 'msg_skew-fresh-0', eventType: 'message.sent', payload: '{"type":"message.sent"}',
  }], now);
  expect((await row(deliveryId)).claimed_until).toBeNull();
  expect(of(ep.id, await claim(now))).toEqual([deliveryId]);
});

it('a retry asked by a process 90 s ahead of the claiming sender is noted, the delivery left to that claim', async () => {
  const ep = await bed.register('/skew-retry');
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'skew-retry-');
  expect(of(ep.id, await claim(new Date()))).toEqual([deliveryId]);
  const lease = (await row(deliveryId)).claimed_until as Date;
  expect(await requeueDelivery(bed.t.db.pool, ep.id, deliveryId, ahead())).toEqual({ webhookId: 'msg_skew-retry-0' });
  // before: judged not in flight, due at once (the retrier's clock) with no note: a second post beside the first
  expect(await row(deliveryId)).toEqual({ next_attempt_at: lease, claimed_until: lease, retry_asked: true });
});

it('an endpoint enabled again by a process 90 s ahead gives a delivery in flight its lease back as due time', async () => {
  const ep = await bed.register('/skew-resume');
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'skew-resume-');
  expect(of(ep.id, await claim(new Date()))).toEqual([deliveryId]);
  const lease = (await row(deliveryId)).claimed_until as Date;
  await setDeliveriesAside(bed.t.db.pool, ep.id); // disabled while in flight
  expect((await row(deliveryId)).next_attempt_at).toBeNull();
  await resumeDeliveries(bed.t.db.pool, ep.id, ahead());
  // before: due at the resumer's clock, not at the lease
  expect(await row(deliveryId)).toEqual({ next_attempt_at: lease, claimed_until: lease, retry_asked: false });
});

it('the due claim stays a plain index scan of the due index, as the sender runs it', async () => {
  const ep = await bed.register('/skew-plan');
  await bed.queue(ep.id, 3_000, 'skew-plan-');
  await claim(new Date(), 1); // some claimed, their (short) lease soon ended
  const c = await bed.t.db.pool.connect();
  try {
    await c.query('BEGIN');
    await c.query(CLAIM_DUE_PLAN_SETTING);
    const now = new Date();
    const r = await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${CLAIM_DUE_DELIVERIES_SQL}`, [now, 200, new Date(now.getTime() + CLAIM_LEASE_MS), []]);
    const plan = r.rows.map((x) => x['QUERY PLAN']).join('\n');
    if (process.env.SHOW_PLAN) console.log(plan);
    expect(plan).toMatch(/Index Scan using deliveries_due on deliveries c/);
    expect(plan).not.toMatch(/Bitmap/);
  } finally {
    await c.query('ROLLBACK');
    c.release();
  }
});
