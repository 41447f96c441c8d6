import type { Pool, PoolClient } from 'pg';
import type { EventStore, Position } from '../ports/event-store';
import type { Projection } from './projection';
import type { ProjectionHealth } from '../shared/metrics';
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

/** How far a reader at `position` is behind the log: the age of the first event after it (by its `at`), 0 at the head. */
export async function secondsBehind(store: Pick<EventStore, 'readAll'>, position: Position, now: Date): Promise<number> {
  const [next] = (await store.readAll(position, 1)).events;
  return next === undefined ? 0 : Math.max(0, (now.getTime() - Date.parse(next.metadata.at)) / 1000);
}

/**
 * Each created projection's state and lag, from its stored checkpoint: the age of the first event after it (by the
 * event's `at`), 0 at the head. A checkpoint passing events a projection does not handle is stored within about a
 * second (the runner), so a healthy projection shows at most a second or two.
 */
export async function readProjectionHealth(
  db: Pool,
  store: Pick<EventStore, 'readAll'>,
  projections: readonly Projection[],
  now: Date,
): Promise<ProjectionHealth[]> {
  const checkpoints = new Map((await readCheckpoints(db)).map((c) => [c.name, c]));
  const health: ProjectionHealth[] = [];
  for (const p of projections) {
    const cp = checkpoints.get(p.name);
    if (cp === undefined) continue;
    health.push({ projection: p.name, failing: cp.state === 'failing', lagSeconds: await secondsBehind(store, cp.position, now) });
  }
  return health;
}

export async function readCheckpoint(db: Pool | PoolClient, name: string): Promise<CheckpointRow | undefined> {
  return (await db.query<CheckpointRow>('SELECT * FROM projections.checkpoints WHERE name = $1', [name])).rows[0];
}

/**
 * Creates the projection's schema, tables and checkpoint row when missing (idempotent, serialised). A projection
 * that has its checkpoint needs nothing, and its lock is not waited for: a process holding it (a long batch, or one
 * paused in a batch) held every CLI command and every process's start behind it (review 15).
 */
export async function ensureProjection(pool: Pool, p: Projection): Promise<void> {
  if (await readCheckpoint(pool, p.name)) return;
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
