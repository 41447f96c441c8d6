import { queueDeliveries, releaseDeliveries, resumeDeliveries, setDeliveriesAside, type ClaimedDelivery } from '../../src/projections/webhooks/deliveries';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Statements that change many deliveries of an endpoint lock them in delivery_id order, so two of them never
// deadlock: a PATCH disabling an endpoint (setDeliveriesAside) beside a sender giving back its lane on the change's
// notification (releaseDeliveries) answered 500 "deadlock detected" once in a whole-suite run (found 2026-11-27).
// Here both run at once on the same 300 rows, the releases in shuffled orders, round after round.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ poolSize: 10 });
});
afterAll(() => db.drop());

it('setting an endpoint aside, resuming it and giving its deliveries back, all at once: none deadlocks', async () => {
  const failures: string[] = [];
  for (let round = 0; round < 30; round++) {
    const now = new Date();
    const lease = new Date(now.getTime() + 60_000);
    const endpointId = `ep-${round}`;
    const { claimed } = await queueDeliveries(db.pool, Array.from({ length: 300 }, (_, i) => ({
      endpointId, companyId: 1, webhookId: `msg_${round}_${i}`, eventType: 'message.sent', payload: '{}',
    })), now, { count: 300, until: lease });
    const leased = [...claimed].sort(() => Math.random() - 0.5).map((c: ClaimedDelivery) => ({ deliveryId: c.delivery_id, leaseUntil: lease }));
    const outcomes = await Promise.allSettled([
      setDeliveriesAside(db.pool, endpointId),
      releaseDeliveries(db.pool, leased.slice(0, 150), now),
      releaseDeliveries(db.pool, leased.slice(150).reverse(), now),
      resumeDeliveries(db.pool, endpointId, now),
    ]);
    for (const o of outcomes) if (o.status === 'rejected') failures.push(`round ${round}: ${(o.reason as Error).message}`);
  }
  expect(failures).toEqual([]);
});
