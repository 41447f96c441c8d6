import type { Pool } from 'pg';
import type { ClaimedDelivery } from '../projections/webhooks/deliveries';

// The hand-off (docs/webhooks.md, "Hand-off"): the fan-out queues fresh deliveries already claimed by a sender of
// its own process (due at the end of that sender's lease) and passes them over in memory, so the sender posts them
// without claiming them from the table: one claim statement and one row update less per event. What a process
// killed after the hand-off had not sent is due again when the lease ends, as for any claim. Intakes are kept per
// database (its pool): a fan-out never hands deliveries to a sender writing another database.

export interface DeliveryIntake {
  /** how many fresh deliveries this sender takes now (0 when stopping) */
  capacity(): number;
  /** how long the deliveries handed now are this sender's: their due time in the table */
  leaseUntil(now: Date): Date;
  /** deliveries queued claimed until `leaseUntil`, committed */
  receive(deliveries: readonly ClaimedDelivery[], leaseUntil: Date): void;
}

const intakes = new WeakMap<Pool, Set<DeliveryIntake>>();

export function registerIntake(pool: Pool, intake: DeliveryIntake): () => void {
  const set = intakes.get(pool) ?? new Set<DeliveryIntake>();
  intakes.set(pool, set);
  set.add(intake);
  return () => void set.delete(intake);
}

/** The intake of this database with the most room, if any has room. */
export function intakeOf(pool: Pool): { intake: DeliveryIntake; capacity: number } | undefined {
  let best: { intake: DeliveryIntake; capacity: number } | undefined;
  for (const intake of intakes.get(pool) ?? []) {
    const capacity = intake.capacity();
    if (capacity > 0 && (!best || capacity > best.capacity)) best = { intake, capacity };
  }
  return best;
}
