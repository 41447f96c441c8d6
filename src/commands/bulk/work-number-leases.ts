// Number leases in the work table (bulk_work.number_leases): one dispatcher at a time serves a number with a
// spaced tier, so its pacing holds across processes.
import type { Pool } from 'pg';

// ---------------------------------------------------------------- number leases (pacing of spaced tiers)

// A lease written with its owner's clock is taken over once both the taker's clock and Postgres's have passed it: a
// dispatcher whose clock runs ahead cannot take a live lease (docs/reliability.md, "Clocks of several processes").

export async function acquireNumberLease(pool: Pool, numberId: number, owner: string, now: Date, leaseMs: number): Promise<boolean> {
  const r = await pool.query(
    `INSERT INTO bulk_work.number_leases (number_id, owner, lease_until) VALUES ($1, $2, $3)
     ON CONFLICT (number_id) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
      WHERE bulk_work.number_leases.owner = EXCLUDED.owner OR (bulk_work.number_leases.lease_until < $4 AND bulk_work.number_leases.lease_until < now())
     RETURNING owner`,
    [numberId, owner, new Date(now.getTime() + leaseMs), now],
  );
  return (r.rowCount ?? 0) > 0;
}

export async function releaseNumberLease(pool: Pool, numberId: number, owner: string): Promise<void> {
  await pool.query('DELETE FROM bulk_work.number_leases WHERE number_id = $1 AND owner = $2', [numberId, owner]);
}

/**
 * Ends a number lease at its owner's next send slot (2026-11-27): the lease row keeps the number until then, so a
 * dispatcher of another process that takes the number next starts no sooner than the tier's spacing (or the
 * provider's backoff) after the last send. A slot already past (or none) ends the lease at once.
 */
export async function releaseNumberLeaseAtSlot(pool: Pool, numberId: number, owner: string, nextSlot: Date | null, now: Date): Promise<void> {
  if (!nextSlot || nextSlot.getTime() <= now.getTime()) {
    await releaseNumberLease(pool, numberId, owner);
    return;
  }
  await pool.query('UPDATE bulk_work.number_leases SET lease_until = $3 WHERE number_id = $1 AND owner = $2', [numberId, owner, nextSlot]);
}
