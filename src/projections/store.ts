import type { Pool, PoolClient } from 'pg';
import type { Position } from '../ports/event-store';
import type { Projection } from './projection';
import { withTransaction } from '../shared/tx';

// Checkpoint bookkeeping shared by the runner, the rebuild and `projections status`.

export const lockKeyOf = (name: string): string => `projection:${name}`;

export interface CheckpointRow {
  name: string;
  version: number;
  position: Position;
  state: string;
  error: string | null;
  updated_at: Date;
}

export async function readCheckpoints(db: Pool | PoolClient): Promise<CheckpointRow[]> {
  return (await db.query<CheckpointRow>('SELECT * FROM projections.checkpoints ORDER BY name')).rows;
}

export async function readCheckpoint(db: Pool | PoolClient, name: string): Promise<CheckpointRow | undefined> {
  return (await db.query<CheckpointRow>('SELECT * FROM projections.checkpoints WHERE name = $1', [name])).rows[0];
}

/** Creates the projection's schema, tables and checkpoint row when missing (idempotent, serialised). */
export async function ensureProjection(pool: Pool, p: Projection): Promise<void> {
  await withTransaction(pool, async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockKeyOf(p.name)]);
    const existing = await readCheckpoint(tx, p.name);
    if (!existing) {
      await createTables(tx, p.schema, p);
      await tx.query('INSERT INTO projections.checkpoints (name, version) VALUES ($1, $2)', [p.name, p.version]);
    }
  });
}

export async function createTables(tx: PoolClient, schema: string, p: Projection): Promise<void> {
  await tx.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  await tx.query(`SET LOCAL search_path TO ${schema}, public`);
  await tx.query(p.ddl);
  await tx.query('SET LOCAL search_path TO public');
}
