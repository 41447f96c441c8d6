// Number leases in the work table (bulk_work.number_leases): one dispatcher at a time serves a number with a
// spaced tier, so its pacing holds across processes.
import type { Pool } from 'pg';

// ---------------------------------------------------------------- number leases (pacing of spaced tiers)

export async function acquireNumberLease(pool: Pool, numberId: number, owner: string, now: Date, leaseMs: number): Promise<boolean> {
  const r = await pool.query(
    `INSERT INTO bulk_work.number_leases (number_id, owner, lease_until) VALUES ($1, $2, $3)
     ON CONFLICT (number_id) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
      WHERE bulk_work.number_leases.owner = EXCLUDED.owner OR bulk_work.number_leases.lease_until < $4
     RETURNING owner`,
    [numberId, owner, new Date(now.getTime() + leaseMs), now],
  );
  return (r.rowCount ?? 0) > 0;
}

export async function releaseNumberLease(pool: Pool, numberId: number, owner: string): Promise<void> {
  await pool.query('DELETE FROM bulk_work.number_leases WHERE number_id = $1 AND owner = $2', [numberId, owner]);
}
