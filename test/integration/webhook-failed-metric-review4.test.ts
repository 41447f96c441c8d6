import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// switchboard_webhook_deliveries_failed_total counts the deliveries the sender's records marked failed (docs/webhooks.md,
// "Operating"). Before, it counted every attempt that ended its delivery's schedule, also when a retry asked while that
// attempt was in flight turned the delivery back to pending (reproduced: the counter said 1, the delivery succeeded).

const BASE = '/api/v1/webhook-endpoints/';
let bed: WebhookTestBed;
useWebhookTestBed((b) => { bed = b; });

const failedTotal = async () => (await bed.t.services.metrics.webhookDeliveriesFailed.get()).values[0]?.value ?? 0;
const deliveryStatus = async (deliveryId: string) =>
  (await bed.t.db.pool.query('SELECT status FROM webhooks.deliveries WHERE delivery_id = $1', [deliveryId])).rows[0].status as string;

/** The receiver holds its first answer (503) until `answerFirst`; later requests are answered 204. */
function holdFirstAnswer() {
  const log: string[] = [];
  let answerFirst = () => {};
  const held = new Promise<void>((r) => (answerFirst = r));
  bed.receiver.respond(async () => {
    log.push(`start ${log.length + 1}`);
    if (log.length === 1) {
      await held;
      return 503;
    }
    return 204;
  });
  return { log, answerFirst };
}

it('an attempt that ends the schedule while a retry was asked: not counted failed, the delivery goes on and succeeds', async () => {
  const ep = await bed.register('/retried-last');
  const { log, answerFirst } = holdFirstAnswer();
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'retried-last-');
  const before = await failedTotal();
  const sender = startWebhookSender(bed.t.services, { pollMs: 20, schedule: [] }); // one attempt, then failed
  try {
    await waitUntil(async () => log.length === 1, 20_000, 'the request');
    const retry = await bed.t.app.inject({ method: 'POST', url: `${BASE}${ep.id}/deliveries/${deliveryId}/retry/`, headers: { 'x-api-key': SHOP.key } });
    expect(retry.statusCode).toBe(202);
    answerFirst();
    await waitUntil(async () => (await deliveryStatus(deliveryId)) === 'succeeded', 20_000, 'the retry');
  } finally {
    answerFirst();
    await sender.stop();
  }
  expect(log).toEqual(['start 1', 'start 2']);
  expect(await failedTotal()).toBe(before);
});

it('an attempt that ends the schedule with no retry asked: counted failed once', async () => {
  const ep = await bed.register('/failed-last');
  const { answerFirst } = holdFirstAnswer();
  answerFirst();
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'failed-last-');
  const before = await failedTotal();
  const sender = startWebhookSender(bed.t.services, { pollMs: 20, schedule: [] });
  try {
    await waitUntil(async () => (await deliveryStatus(deliveryId)) === 'failed', 20_000, 'the failure');
  } finally {
    await sender.stop();
  }
  expect(await failedTotal()).toBe(before + 1);
});
