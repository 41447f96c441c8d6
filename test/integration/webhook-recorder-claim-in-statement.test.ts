import { Client, type Pool } from 'pg';
import pino from 'pino';
import { listDeliveryAttempts, queueDeliveries, type ClaimedDelivery } from '../../src/projections/webhooks/deliveries';
import type { SendingEndpoint } from '../../src/projections/webhooks/queries';
import { createMetrics } from '../../src/shared/metrics';
import type { Services } from '../../src/services';
import { createAttemptRecorder, type Answered } from '../../src/workers/webhook-attempt-recorder';
import { RETRY_SCHEDULE_MS } from '../../src/workers/webhook-schedule';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { waitUntil } from '../support/sends';

// The late-failure check of 0ba1fdb/bdcc7a2 (a failed answer decides its delivery only while the claim it was sent
// under is still the delivery's) was a step before the record's statement: judged by the recorder's clock (an answer
// before its lease's end went straight to the statement) or in a SELECT of its own. A pause between that check and
// the statement (the sender frozen there past its lease) let another sender claim the delivery, and the failure was
// then written over that claim: due again at its retry, posted again beside the other sender's request. The check is
// now a condition of the record's statement, on the rows as it locks them. Such a failure is still logged (the
// endpoint did receive the request; docs/webhooks.md), with next_retry_at the end of the lease it was sent under.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ poolSize: 4 });
});
afterAll(() => db?.drop());

const endpoint = (endpointId: string): SendingEndpoint =>
  ({ endpointId, companyId: 1, url: 'https://example.com/hook', failingSince: null } as unknown as SendingEndpoint);

/** The recorder with its clock, writing through `pool` (by default the test database's). */
function recorderAt(clock: { now: Date }, pool: Pool = db.pool) {
  const services = { pool, now: () => clock.now, metrics: createMetrics(), logger: pino({ level: 'silent' }) } as unknown as Services;
  return createAttemptRecorder(services, {
    batchSize: 10, schedule: RETRY_SCHEDULE_MS, random: () => 0.5, deps: {} as never,
    inFlight: () => 0, onDisabled: () => undefined, onRecorded: () => undefined,
  });
}

/** The pool, but `beforeRecord` runs just before the record statement is sent: the sender paused right there. */
function pausingBeforeRecord(beforeRecord: () => Promise<void>): Pool {
  return new Proxy(db.pool, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver);
      return async (...args: unknown[]) => {
        const config = args[0] as { name?: string };
        if (typeof config === 'object' && config?.name === 'webhooks_record_attempts') await beforeRecord();
        return (target.query as (...a: unknown[]) => unknown)(...args);
      };
    },
  });
}

async function queueAndClaim(endpointId: string, now: Date, leaseUntil: Date): Promise<ClaimedDelivery> {
  const { claimed } = await queueDeliveries(db.pool, [{ endpointId, companyId: 1, webhookId: `msg_${endpointId}`, eventType: 'message.sent', payload: '{}' }],
    now, { count: 1, until: leaseUntil });
  expect(claimed).toHaveLength(1);
  return claimed[0];
}

/** Another sender's claim, as claimDueDeliveries's CLAIM_SET writes it (src/projections/webhooks/deliveries.ts). */
const CLAIM_BY_OTHER = 'UPDATE webhooks.deliveries SET next_attempt_at = $2, claimed_until = $2, retry_asked = false WHERE delivery_id = $1';

const failedAnswer = (d: ClaimedDelivery, endpointId: string, sentAt: Date, leaseUntil: Date): Answered => ({
  d, ep: endpoint(endpointId), ok: false, sentAt, leaseUntil: leaseUntil.getTime(),
  res: { statusCode: 500, failure: null, error: null, body: '', retryAfter: null, latencyMs: 2_000 },
});

async function deliveryRow(id: string) {
  const { rows } = await db.pool.query(
    'SELECT status, attempts, next_attempt_at, claimed_until FROM webhooks.deliveries WHERE delivery_id = $1', [id]);
  return rows[0] as { status: string; attempts: number; next_attempt_at: Date | null; claimed_until: Date | null };
}

it('a failure answered within its lease, the sender paused before the record past the lease and another sender claiming meanwhile, leaves that claim alone and is logged', async () => {
  const t0 = new Date(Date.UTC(2026, 10, 28, 10, 0, 0));
  const leaseUntil = new Date(t0.getTime() + 60_000);
  const otherLease = new Date(leaseUntil.getTime() + 60_500);
  const d = await queueAndClaim('ep-paused-before-record', t0, leaseUntil);
  // the answer came and the recorder reads its clock 20 s before the lease's end: nothing looks late
  const clock = { now: new Date(leaseUntil.getTime() - 20_000) };
  const recorder = recorderAt(clock, pausingBeforeRecord(() => db.pool.query(CLAIM_BY_OTHER, [d.delivery_id, otherLease]).then(() => undefined)));
  recorder.add(failedAnswer(d, 'ep-paused-before-record', new Date(leaseUntil.getTime() - 22_000), leaseUntil));
  await recorder.flush();

  // the other sender's claim stands: not due before its lease, not made due at this failure's retry (5 s)
  const row = await deliveryRow(d.delivery_id);
  expect(row).toMatchObject({ status: 'pending', attempts: 0 });
  expect(row.claimed_until?.getTime()).toBe(otherLease.getTime());
  expect(row.next_attempt_at?.getTime()).toBe(otherLease.getTime());
  // what the client's deliveries page shows: the request its endpoint received, due again at its lease's end
  const page = await listDeliveryAttempts(db.pool, 'ep-paused-before-record', { limit: 10, offset: 0 });
  expect(page.count).toBe(1);
  expect(page.rows).toEqual([expect.objectContaining({
    deliveryId: d.delivery_id, statusCode: 500, error: 'HTTP 500', latencyMs: 2_000,
    attemptedAt: new Date(leaseUntil.getTime() - 22_000), nextRetryAt: leaseUntil, deliveryStatus: 'pending',
  })]);
});

it('a claim committed while the record statement waits for the row is seen by it (judged on the row as locked)', async () => {
  const t0 = new Date(Date.UTC(2026, 10, 28, 11, 0, 0));
  const leaseUntil = new Date(t0.getTime() + 60_000);
  const otherLease = new Date(leaseUntil.getTime() + 60_500);
  const d = await queueAndClaim('ep-claim-racing-record', t0, leaseUntil);
  const other = new Client({ connectionString: db.url });
  await other.connect();
  try {
    // the other sender's claim holds the row, uncommitted, when the record's statement starts
    await other.query('BEGIN');
    await other.query(CLAIM_BY_OTHER, [d.delivery_id, otherLease]);
    const clock = { now: new Date(leaseUntil.getTime() + 5) };
    const recorder = recorderAt(clock);
    recorder.add(failedAnswer(d, 'ep-claim-racing-record', new Date(leaseUntil.getTime() - 12_000), leaseUntil));
    const flushed = recorder.flush();
    await waitUntil(async () => (await db.pool.query(
      `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows.length > 0,
    20_000, 'the record waiting for the claimed row');
    await other.query('COMMIT');
    await flushed;
  } finally {
    await other.end();
  }
  const row = await deliveryRow(d.delivery_id);
  expect(row).toMatchObject({ status: 'pending', attempts: 0 });
  expect(row.claimed_until?.getTime()).toBe(otherLease.getTime());
  const page = await listDeliveryAttempts(db.pool, 'ep-claim-racing-record', { limit: 10, offset: 0 });
  expect(page.rows).toEqual([expect.objectContaining({ statusCode: 500, nextRetryAt: leaseUntil })]);
});

it('a failure still under its own claim is recorded on its schedule; a success over another claim is recorded', async () => {
  const t0 = new Date(Date.UTC(2026, 10, 28, 12, 0, 0));
  const leaseUntil = new Date(t0.getTime() + 60_000);
  const own = await queueAndClaim('ep-own-claim', t0, leaseUntil);
  const won = await queueAndClaim('ep-success-late', t0, leaseUntil);
  await db.pool.query(CLAIM_BY_OTHER, [won.delivery_id, new Date(leaseUntil.getTime() + 60_500)]);
  const clock = { now: new Date(leaseUntil.getTime() - 20_000) };
  const recorder = recorderAt(clock);
  recorder.add(failedAnswer(own, 'ep-own-claim', new Date(leaseUntil.getTime() - 22_000), leaseUntil));
  recorder.add({ ...failedAnswer(won, 'ep-success-late', new Date(leaseUntil.getTime() - 22_000), leaseUntil), ok: true, res: { statusCode: 204, failure: null, error: null, body: '', retryAfter: null, latencyMs: 5 } });
  await recorder.flush();
  const ownRow = await deliveryRow(own.delivery_id);
  expect(ownRow).toMatchObject({ status: 'pending', attempts: 1, claimed_until: null });
  // the schedule's first wait (5 s, jitter at its middle) after the record
  expect(ownRow.next_attempt_at?.getTime()).toBe(clock.now.getTime() + RETRY_SCHEDULE_MS[0]);
  expect(await deliveryRow(won.delivery_id)).toMatchObject({ status: 'succeeded', attempts: 1, claimed_until: null, next_attempt_at: null });
});

it('a failure answered after another sender posted and recorded the delivery (succeeded) is logged, due again at its lease end, the delivery left succeeded', async () => {
  const t0 = new Date(Date.UTC(2026, 10, 28, 13, 0, 0));
  const leaseUntil = new Date(t0.getTime() + 60_000);
  const d = await queueAndClaim('ep-done-by-other', t0, leaseUntil);
  // the other sender's claim, post and record (a success: claim cleared)
  await db.pool.query(`UPDATE webhooks.deliveries SET status = 'succeeded', attempts = 1, next_attempt_at = NULL, claimed_until = NULL, completed_at = $2
                        WHERE delivery_id = $1`, [d.delivery_id, new Date(leaseUntil.getTime() + 1_000)]);
  const clock = { now: new Date(leaseUntil.getTime() + 90_000) };
  const recorder = recorderAt(clock);
  recorder.add(failedAnswer(d, 'ep-done-by-other', new Date(leaseUntil.getTime() - 12_000), leaseUntil));
  await recorder.flush();
  expect(await deliveryRow(d.delivery_id)).toMatchObject({ status: 'succeeded', attempts: 1, next_attempt_at: null, claimed_until: null });
  const page = await listDeliveryAttempts(db.pool, 'ep-done-by-other', { limit: 10, offset: 0 });
  // before: logged with a retry 5 s after the record that would never come
  expect(page.rows).toEqual([expect.objectContaining({ statusCode: 500, nextRetryAt: leaseUntil, deliveryStatus: 'succeeded' })]);
});
