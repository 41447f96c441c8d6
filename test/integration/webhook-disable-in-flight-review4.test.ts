import { queueDeliveries, releaseDeliveries, requeueDelivery, resumeDeliveries, setDeliveriesAside } from '../../src/projections/webhooks/deliveries';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';
import { claimElsewhere as claimElsewhereOn, deliveryRow as deliveryRowOf, holdFirstAnswer as holdFirstAnswerOf } from '../support/webhook-in-flight';

// An endpoint disabled and enabled again (PATCH enabled=false, then true) while a request of one of its deliveries is
// in flight (docs/webhooks.md, "Disabled while in flight"): before, the set-aside dropped the claim's lease and the
// resumption made the delivery due at once, so the next claim posted it beside the first request (reproduced: the
// receiver holding its first answer got the second request meanwhile). Now the resumption gives a delivery whose
// claim's attempt is not recorded its lease back: still in its sender's hands, and the record of the attempt decides.

const BASE = '/api/v1/webhook-endpoints/';
let bed: WebhookTestBed;
useWebhookTestBed((b) => { bed = b; });

const holdFirstAnswer = (first: number, later: number) => holdFirstAnswerOf(bed, first, later);

const patch = async (endpointId: string, enabled: boolean) => {
  const res = await bed.t.app.inject({ method: 'PATCH', url: `${BASE}${endpointId}/`, headers: { 'x-api-key': SHOP.key }, payload: { enabled } });
  expect([res.statusCode, res.json().enabled]).toEqual([200, enabled]);
};
const deliveryRow = (deliveryId: string) => deliveryRowOf(bed.t.db.pool, deliveryId);
const claimElsewhere = () => claimElsewhereOn(bed.t.db.pool);

it('disabled and enabled again while the request is in flight: nothing is posted beside it, and its success ends the delivery', async () => {
  const ep = await bed.register('/toggled-ok');
  const { log, answerFirst } = holdFirstAnswer(204, 204);
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'toggled-ok-');
  const sender = startWebhookSender(bed.t.services, { pollMs: 20 });
  try {
    await waitUntil(async () => log.includes('start 1'), 20_000, 'the first request');
    await patch(ep.id, false);
    await patch(ep.id, true);
    expect(await claimElsewhere()).toEqual([]);
    answerFirst();
    await waitUntil(async () => (await deliveryRow(deliveryId)).status === 'succeeded', 20_000, 'the answer recorded');
  } finally {
    answerFirst();
    await sender.stop();
  }
  expect(log).toEqual(['start 1', 'answer 1']);
  expect(await deliveryRow(deliveryId)).toEqual({ status: 'succeeded', attempts: 1, next_attempt_at: null });
});

it('disabled and enabled again while the request is in flight: its failed answer schedules the next attempt', async () => {
  const ep = await bed.register('/toggled-failed');
  const { log, answerFirst } = holdFirstAnswer(503, 204);
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'toggled-failed-');
  const sender = startWebhookSender(bed.t.services, { pollMs: 20, schedule: [3_600_000, 3_600_000] });
  try {
    await waitUntil(async () => log.includes('start 1'), 20_000, 'the first request');
    await patch(ep.id, false);
    await patch(ep.id, true);
    expect(await claimElsewhere()).toEqual([]);
    answerFirst();
    await waitUntil(async () => (await deliveryRow(deliveryId)).attempts === 1, 20_000, 'the answer recorded');
  } finally {
    answerFirst();
    await sender.stop();
  }
  expect(log).toEqual(['start 1', 'answer 1']);
  // the record decided: its next attempt on the schedule (an hour on), not now
  const { rows: [attempt] } = await bed.t.db.pool.query('SELECT next_retry_at FROM webhooks.attempts WHERE delivery_id = $1', [deliveryId]);
  expect(await deliveryRow(deliveryId)).toEqual({ status: 'pending', attempts: 1, next_attempt_at: attempt.next_retry_at });
  expect(await claimElsewhere()).toEqual([]);
});

it('disabled while the request is in flight and answered meanwhile: set aside with the rest, due at once when enabled again', async () => {
  const ep = await bed.register('/disabled-answered');
  const { log, answerFirst } = holdFirstAnswer(503, 204);
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'disabled-answered-');
  const sender = startWebhookSender(bed.t.services, { pollMs: 20, schedule: [3_600_000, 3_600_000] });
  try {
    await waitUntil(async () => log.includes('start 1'), 20_000, 'the first request');
    await patch(ep.id, false);
    answerFirst();
    await waitUntil(async () => (await deliveryRow(deliveryId)).attempts === 1, 20_000, 'the answer recorded');
    expect(await deliveryRow(deliveryId)).toEqual({ status: 'pending', attempts: 1, next_attempt_at: null });
    await patch(ep.id, true);
    await waitUntil(async () => (await deliveryRow(deliveryId)).status === 'succeeded', 20_000, 'the delivery after the endpoint was enabled');
  } finally {
    answerFirst();
    await sender.stop();
  }
  expect(log).toEqual(['start 1', 'answer 1', 'start 2', 'answer 2']);
});

it('disabled by a 410 with a delivery waiting in its lane: it is given back, and due at once when the endpoint is enabled again', async () => {
  const ep = await bed.register('/gone-waiting');
  // one request at a time: the first is answered 410, the second held while the third waits in the lane
  const log: string[] = [];
  let answerSecond = () => {};
  const held = new Promise<void>((r) => (answerSecond = r));
  bed.receiver.respond(async () => {
    log.push(`start ${log.length + 1}`);
    if (log.length === 1) return 410;
    await held;
    return 204;
  });
  const { queued: [first, second, third] } = await bed.queue(ep.id, 3, 'gone-waiting-');
  const sender = startWebhookSender(bed.t.services, { pollMs: 20, endpointConcurrency: 1 });
  try {
    await waitUntil(async () => (await deliveryRow(first)).status === 'failed' && (await deliveryRow(third)).next_attempt_at === null, 20_000, 'the 410 recorded');
  } finally {
    answerSecond();
    await sender.stop(); // after the give-backs under way
  }
  expect(log).toEqual(['start 1', 'start 2']);
  expect(await deliveryRow(second)).toEqual({ status: 'succeeded', attempts: 1, next_attempt_at: null });
  expect(await deliveryRow(third)).toEqual({ status: 'pending', attempts: 0, next_attempt_at: null });
  await patch(ep.id, true);
  expect((await claimElsewhere()).map((d) => d.delivery_id)).toEqual([third]);
});

describe('set aside and resumed, as the table keeps a claim', () => {
  const claimedDelivery = async (webhookId: string, leaseUntil: Date, now: Date) => {
    const ep = await bed.register(`/${webhookId}`);
    const { claimed: [d] } = await queueDeliveries(bed.t.db.pool, [{ endpointId: ep.id, companyId: SHOP.companyId, webhookId, eventType: 'message.sent', payload: '{}' }],
      now, { count: 1, until: leaseUntil });
    return { endpointId: ep.id, deliveryId: d.delivery_id };
  };
  const disableAndEnable = async (endpointId: string, between: () => Promise<unknown> = async () => undefined) => {
    await bed.t.db.pool.query('UPDATE rm_webhooks.endpoints SET enabled = false WHERE endpoint_id = $1', [endpointId]);
    await setDeliveriesAside(bed.t.db.pool, endpointId);
    const setAside = await bed.t.db.pool.query('SELECT next_attempt_at FROM webhooks.deliveries WHERE endpoint_id = $1', [endpointId]);
    await between();
    await bed.t.db.pool.query('UPDATE rm_webhooks.endpoints SET enabled = true WHERE endpoint_id = $1', [endpointId]);
    await resumeDeliveries(bed.t.db.pool, endpointId, new Date());
    return setAside.rows.map((r) => r.next_attempt_at);
  };

  it('while disabled, a delivery in flight has no due time like the rest; resumed, it is due at its lease again', async () => {
    const now = new Date();
    const lease = new Date(now.getTime() + 60_000);
    const { endpointId, deliveryId } = await claimedDelivery('msg_lease-kept', lease, now);
    const { queued: [waiting] } = await bed.queue(endpointId, 1, 'lease-kept-waiting-');
    expect(await disableAndEnable(endpointId)).toEqual([null, null]);
    expect((await deliveryRow(deliveryId)).next_attempt_at).toEqual(lease);
    expect((await deliveryRow(waiting)).next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now());
  });

  it('a retry asked while it was set aside in flight is noted, as for a delivery in flight', async () => {
    const now = new Date();
    const lease = new Date(now.getTime() + 60_000);
    const { endpointId, deliveryId } = await claimedDelivery('msg_retry-set-aside', lease, now);
    await disableAndEnable(endpointId, () => requeueDelivery(bed.t.db.pool, endpointId, deliveryId, new Date()));
    const { rows: [row] } = await bed.t.db.pool.query('SELECT next_attempt_at, retry_asked FROM webhooks.deliveries WHERE delivery_id = $1', [deliveryId]);
    expect(row).toEqual({ next_attempt_at: lease, retry_asked: true });
  });

  it('given back by its sender while set aside (it never posted it): resumed, it is due at once', async () => {
    const now = new Date();
    const lease = new Date(now.getTime() + 60_000);
    const { endpointId, deliveryId } = await claimedDelivery('msg_given-back', lease, now);
    await disableAndEnable(endpointId, () => releaseDeliveries(bed.t.db.pool, [{ deliveryId, leaseUntil: lease }], new Date()));
    expect((await deliveryRow(deliveryId)).next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now());
  });

  it('a claim whose lease ended (its sender died) is due at once when resumed', async () => {
    const now = new Date();
    const { endpointId, deliveryId } = await claimedDelivery('msg_lease-over', new Date(now.getTime() - 1_000), new Date(now.getTime() - 61_000));
    await disableAndEnable(endpointId);
    expect((await deliveryRow(deliveryId)).next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now());
  });
});
