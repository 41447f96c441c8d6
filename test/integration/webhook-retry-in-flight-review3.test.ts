import { queueDeliveries, recordAttempts, requeueDelivery } from '../../src/projections/webhooks/deliveries';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';
import { claimElsewhere as claimElsewhereOn, deliveryRow as deliveryRowOf, holdFirstAnswer as holdFirstAnswerOf } from '../support/webhook-in-flight';

// A retry (POST .../deliveries/{id}/retry/) of a delivery whose request is in flight (docs/webhooks.md, "Retrying a
// delivery in flight"): before, it made the delivery due at once, and the sender's next claim posted it a second
// time beside the first request (reproduced: a receiver holding its first answer got the second request meanwhile).
// Now the delivery stays in the sender's hands and is due right after that attempt, unless the attempt succeeded.

const BASE = '/api/v1/webhook-endpoints/';
let bed: WebhookTestBed;
useWebhookTestBed((b) => { bed = b; });

const holdFirstAnswer = (first: number, later: number) => holdFirstAnswerOf(bed, first, later);

const retry = (endpointId: string, deliveryId: string) =>
  bed.t.app.inject({ method: 'POST', url: `${BASE}${endpointId}/deliveries/${deliveryId}/retry/`, headers: { 'x-api-key': SHOP.key } });
const deliveryRow = (deliveryId: string) => deliveryRowOf(bed.t.db.pool, deliveryId);
const claimElsewhere = () => claimElsewhereOn(bed.t.db.pool);

it('a retry while the request is in flight posts nothing beside it: the delivery is posted again right after the failed answer', async () => {
  const ep = await bed.register('/held-failed');
  const { log, answerFirst } = holdFirstAnswer(503, 204);
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'held-failed-');
  // after a failure the schedule's next attempt would be an hour later: only the retry asked makes it due sooner
  const sender = startWebhookSender(bed.t.services, { pollMs: 20, schedule: [3_600_000, 3_600_000] });
  try {
    await waitUntil(async () => log.includes('start 1'), 20_000, 'the first request');
    for (let click = 0; click < 2; click++) {
      const res = await retry(ep.id, deliveryId);
      expect([res.statusCode, res.json()]).toEqual([202, { delivery_id: deliveryId, webhook_id: 'msg_held-failed-0', status: 'queued' }]);
    }
    expect(await claimElsewhere()).toEqual([]);
    answerFirst();
    await waitUntil(async () => (await deliveryRow(deliveryId)).status === 'succeeded', 20_000, 'the retry after the failed answer');
  } finally {
    answerFirst();
    await sender.stop();
  }
  expect(log).toEqual(['start 1', 'answer 1', 'start 2', 'answer 2']);
  expect(await deliveryRow(deliveryId)).toMatchObject({ status: 'succeeded', attempts: 2 });
  const attempts = (await bed.t.app.inject({ method: 'GET', url: `${BASE}${ep.id}/deliveries/`, headers: { 'x-api-key': SHOP.key } })).json();
  expect(attempts.results.map((a: Record<string, unknown>) => [a.delivery_id, a.status_code, a.error, a.delivery_status])).toEqual([
    [deliveryId, 204, null, 'succeeded'],
    [deliveryId, 503, 'HTTP 503', 'succeeded'],
  ]);
});

it('a retry while the request is in flight that then succeeds: posted once, succeeded', async () => {
  const ep = await bed.register('/held-ok');
  const { log, answerFirst } = holdFirstAnswer(204, 204);
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'held-ok-');
  const sender = startWebhookSender(bed.t.services, { pollMs: 20 });
  try {
    await waitUntil(async () => log.includes('start 1'), 20_000, 'the first request');
    expect((await retry(ep.id, deliveryId)).statusCode).toBe(202);
    expect(await claimElsewhere()).toEqual([]);
    answerFirst();
    await waitUntil(async () => (await deliveryRow(deliveryId)).status === 'succeeded', 20_000, 'the answer recorded');
  } finally {
    answerFirst();
    await sender.stop();
  }
  expect(log).toEqual(['start 1', 'answer 1']);
  expect(await deliveryRow(deliveryId)).toMatchObject({ status: 'succeeded', attempts: 1, next_attempt_at: null });
});

describe('the retry noted on a claimed delivery, as the record of its attempt applies it', () => {
  const claimedDelivery = async (webhookId: string, leaseUntil: Date, now: Date) => {
    const ep = await bed.register(`/${webhookId}`);
    const { claimed: [d] } = await queueDeliveries(bed.t.db.pool, [{ endpointId: ep.id, companyId: SHOP.companyId, webhookId, eventType: 'message.sent', payload: '{}' }],
      now, { count: 1, until: leaseUntil });
    return { endpointId: ep.id, deliveryId: d.delivery_id };
  };
  const record = (endpointId: string, deliveryId: string, status: 'pending' | 'failed', attempts: number, at: Date) =>
    recordAttempts(bed.t.db.pool, [{
      deliveryId, endpointId, status, attempts, attemptedAt: at, statusCode: 500, latencyMs: 1, error: 'HTTP 500',
      nextAt: status === 'pending' ? new Date(at.getTime() + 3_600_000) : null,
    }], { recovered: [], failing: [] }, at, new Date(0));

  it('the attempt that ended the schedule (failed): pending, due at once, a fresh schedule', async () => {
    const now = new Date();
    const { endpointId, deliveryId } = await claimedDelivery('msg_last-attempt', new Date(now.getTime() + 60_000), now);
    await requeueDelivery(bed.t.db.pool, endpointId, deliveryId, now);
    const at = new Date(now.getTime() + 1_000);
    await record(endpointId, deliveryId, 'failed', 15, at);
    expect(await deliveryRow(deliveryId)).toEqual({ status: 'pending', attempts: 0, next_attempt_at: at });
  });

  it('a retry is noted once: the next attempt after it is recorded on its schedule', async () => {
    const now = new Date();
    const { endpointId, deliveryId } = await claimedDelivery('msg_noted-once', new Date(now.getTime() + 60_000), now);
    await requeueDelivery(bed.t.db.pool, endpointId, deliveryId, now);
    const at = new Date(now.getTime() + 1_000);
    await record(endpointId, deliveryId, 'pending', 1, at);
    expect(await deliveryRow(deliveryId)).toEqual({ status: 'pending', attempts: 1, next_attempt_at: at });
    await record(endpointId, deliveryId, 'pending', 2, at);
    expect(await deliveryRow(deliveryId)).toEqual({ status: 'pending', attempts: 2, next_attempt_at: new Date(at.getTime() + 3_600_000) });
  });

  it('a delivery never claimed is not in flight: the retry makes it due now', async () => {
    const now = new Date();
    const ep = await bed.register('/never-claimed');
    const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'never-claimed-', new Date(now.getTime() - 1_000));
    expect((await requeueDelivery(bed.t.db.pool, ep.id, deliveryId, now))?.webhookId).toBe('msg_never-claimed-0');
    expect(await deliveryRow(deliveryId)).toEqual({ status: 'pending', attempts: 0, next_attempt_at: now });
  });

  it('a claim whose lease ended (its sender died) is not in flight: the retry makes it due now', async () => {
    const now = new Date();
    const { endpointId, deliveryId } = await claimedDelivery('msg_lease-ended', new Date(now.getTime() - 1_000), new Date(now.getTime() - 61_000));
    await requeueDelivery(bed.t.db.pool, endpointId, deliveryId, now);
    expect(await deliveryRow(deliveryId)).toEqual({ status: 'pending', attempts: 0, next_attempt_at: now });
  });
});
