import { queueDeliveries, recordAttempts, setDeliveriesAside, type AttemptRecord } from '../../src/projections/webhooks/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/db';

// The sender's record of a batch of answers (recordAttempts, the hot path) and a PATCH disabling the same endpoint
// (setDeliveriesAside) lock the same pending deliveries: the record in its batch's order (the order the answers
// came), the PATCH in delivery_id order. Here a batch in descending delivery_id order and the PATCH run at once on
// the same 200 rows, round after round: none may deadlock, and the attempt log keeps the batch's order.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ poolSize: 10 });
});
afterAll(() => db.drop());

it('recording a batch of answers while the endpoint is disabled, rows in opposite orders: none deadlocks', async () => {
  const failures: string[] = [];
  for (let round = 0; round < 60; round++) {
    const now = new Date();
    const lease = new Date(now.getTime() + 60_000);
    const endpointId = `ep-${round}`;
    const { claimed } = await queueDeliveries(db.pool, Array.from({ length: 200 }, (_, i) => ({
      endpointId, companyId: 1, webhookId: `msg_${round}_${i}`, eventType: 'message.sent', payload: '{}',
    })), now, { count: 200, until: lease });
    const answers: AttemptRecord[] = claimed.map((c) => c.delivery_id).sort().reverse().map((deliveryId) => ({
      deliveryId, endpointId, status: 'pending', attempts: 1, attemptedAt: now, statusCode: 500, latencyMs: 3, error: 'HTTP 500',
      nextAt: new Date(now.getTime() + 5_000),
    }));
    const outcomes = await Promise.allSettled([
      recordAttempts(db.pool, answers, { recovered: [], failing: [endpointId] }, now, new Date(0)),
      setDeliveriesAside(db.pool, endpointId),
    ]);
    for (const o of outcomes) if (o.status === 'rejected') failures.push(`round ${round}: ${(o.reason as Error).message}`);
    const { rows } = await db.pool.query('SELECT delivery_id FROM webhooks.attempts WHERE endpoint_id = $1 ORDER BY attempt_id', [endpointId]);
    if (outcomes[0].status === 'fulfilled') expect(rows.map((r) => r.delivery_id)).toEqual(answers.map((a) => a.deliveryId));
  }
  expect(failures).toEqual([]);
});
