import type { Pool } from 'pg';
import { claimDueDeliveries } from '../../src/projections/webhooks/deliveries';
import type { WebhookTestBed } from './webhook-receiver';

// For tests of a delivery whose request is in flight: a receiver holding its first answer, another worker's claim,
// and a delivery's row.

/** The receiver answers the first request only when `answerFirst` is called; the log says when each starts and ends. */
export function holdFirstAnswer(bed: WebhookTestBed, first: number, later: number): { log: string[]; answerFirst: () => void } {
  const log: string[] = [];
  let answerFirst = () => {};
  const held = new Promise<void>((r) => (answerFirst = r));
  let n = 0;
  bed.receiver.respond(async () => {
    const k = ++n;
    log.push(`start ${k}`);
    if (k === 1) await held;
    log.push(`answer ${k}`);
    return k === 1 ? first : later;
  });
  return { log, answerFirst: () => answerFirst() };
}

export const deliveryRow = async (pool: Pool, deliveryId: string) =>
  (await pool.query('SELECT status, attempts, next_attempt_at FROM webhooks.deliveries WHERE delivery_id = $1', [deliveryId])).rows[0];

/** another worker's claim, as each sender makes it */
export const claimElsewhere = async (pool: Pool) => {
  const now = new Date();
  return claimDueDeliveries(pool, now, 10, new Date(now.getTime() + 60_000));
};
