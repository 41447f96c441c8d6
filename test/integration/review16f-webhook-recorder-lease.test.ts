import pino from 'pino';
import { queueDeliveries, type ClaimedDelivery } from '../../src/projections/webhooks/deliveries';
import type { SendingEndpoint } from '../../src/projections/webhooks/queries';
import { createMetrics } from '../../src/shared/metrics';
import type { Services } from '../../src/services';
import { createAttemptRecorder, type Answered } from '../../src/workers/webhook-attempt-recorder';
import { RETRY_SCHEDULE_MS } from '../../src/workers/webhook-schedule';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Review 16f, of 0ba1fdb (a failed webhook answer after its claim's lease is not recorded): the lease was judged at
// the time the recorder wrote the batch, not by whose the delivery is. A sender that was never paused drops a real
// failure when its answer came just before the lease's end and its batch was written just after (the recorder's
// linger, a batch queued behind a slow one): the attempt vanished from the log and the delivery was posted again at
// once, off its schedule. Now a failed answer written after its lease is recorded while the claim it was sent under
// is still the delivery's (no other sender claimed it: checked under the rows' locks), and dropped only when another
// sender's claim holds it, which is what 0ba1fdb guarded against.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ poolSize: 4 });
});
afterAll(() => db?.drop());

const endpoint = (endpointId: string): SendingEndpoint =>
  ({ endpointId, companyId: 1, url: 'https://example.com/hook', failingSince: null } as unknown as SendingEndpoint);

function recorderAt(clock: { now: Date }) {
  const services = { pool: db.pool, now: () => clock.now, metrics: createMetrics(), logger: pino({ level: 'silent' }) } as unknown as Services;
  return createAttemptRecorder(services, {
    batchSize: 10, schedule: RETRY_SCHEDULE_MS, random: () => 0.5, deps: {} as never,
    inFlight: () => 0, onDisabled: () => undefined, onRecorded: () => undefined,
  });
}

async function queueAndClaim(endpointId: string, now: Date, leaseUntil: Date): Promise<ClaimedDelivery> {
  const { claimed } = await queueDeliveries(db.pool, [{ endpointId, companyId: 1, webhookId: `msg_${endpointId}`, eventType: 'message.sent', payload: '{}' }],
    now, { count: 1, until: leaseUntil });
  expect(claimed).toHaveLength(1);
  return claimed[0];
}

const failedAnswer = (d: ClaimedDelivery, endpointId: string, sentAt: Date, latencyMs: number, leaseUntil: Date): Answered => ({
  d, ep: endpoint(endpointId), ok: false, sentAt, leaseUntil: leaseUntil.getTime(),
  res: { statusCode: 500, failure: null, error: null, body: '', retryAfter: null, latencyMs },
});

async function deliveryRow(id: string) {
  const { rows } = await db.pool.query(
    `SELECT d.status, d.attempts, d.next_attempt_at, d.claimed_until, (SELECT count(*)::int FROM webhooks.attempts a WHERE a.delivery_id = d.delivery_id) AS logged
       FROM webhooks.deliveries d WHERE d.delivery_id = $1`, [id]);
  return rows[0] as { status: string; attempts: number; next_attempt_at: Date; claimed_until: Date | null; logged: number };
}

it('a failure answered before the lease ends and written just after it (no other sender claimed it) is recorded on its schedule', async () => {
  const t0 = new Date(Date.UTC(2026, 10, 28, 8, 0, 0));
  const leaseUntil = new Date(t0.getTime() + 60_000);
  const d = await queueAndClaim('ep-late-write', t0, leaseUntil);
  // sent 10 s before the lease's end, a 500 after 9,990 ms: answered 10 ms before it, written 15 ms after it
  const clock = { now: new Date(leaseUntil.getTime() + 15) };
  const recorder = recorderAt(clock);
  recorder.add(failedAnswer(d, 'ep-late-write', new Date(leaseUntil.getTime() - 10_000), 9_990, leaseUntil));
  await recorder.flush();
  const row = await deliveryRow(d.delivery_id);
  expect(row).toMatchObject({ status: 'pending', attempts: 1, logged: 1, claimed_until: null });
  // due again after the schedule's first wait (5 s, jittered), not at once
  expect(row.next_attempt_at.getTime()).toBeGreaterThan(clock.now.getTime());
});

it('a failure written after its lease, the delivery claimed by another sender since, is not recorded (0ba1fdb kept)', async () => {
  const t0 = new Date(Date.UTC(2026, 10, 28, 9, 0, 0));
  const leaseUntil = new Date(t0.getTime() + 60_000);
  const d = await queueAndClaim('ep-reclaimed', t0, leaseUntil);
  // the lease ran out; another sender claims the delivery (a lease of its own)
  const otherLease = new Date(leaseUntil.getTime() + 60_001);
  // as claimDueDeliveries's CLAIM_SET writes it (src/projections/webhooks/deliveries.ts)
  await db.pool.query('UPDATE webhooks.deliveries SET next_attempt_at = $2, claimed_until = $2, retry_asked = false WHERE delivery_id = $1', [d.delivery_id, otherLease]);
  const clock = { now: new Date(leaseUntil.getTime() + 5_000) };
  const recorder = recorderAt(clock);
  recorder.add(failedAnswer(d, 'ep-reclaimed', new Date(leaseUntil.getTime() - 10_000), 9_990, leaseUntil));
  await recorder.flush();
  const row = await deliveryRow(d.delivery_id);
  // logged since 2026-11-28 (the endpoint received that request; docs/webhooks.md), the delivery left to the other claim
  expect(row).toMatchObject({ status: 'pending', attempts: 0, logged: 1 });
  expect(row.claimed_until?.getTime()).toBe(otherLease.getTime());
  expect(row.next_attempt_at.getTime()).toBe(otherLease.getTime());
});
