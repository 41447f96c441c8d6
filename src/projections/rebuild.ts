import type { Pool, PoolClient } from 'pg';
import { type Position, START } from '../ports/event-store';
import { applyHandled, type LogReader, rebuildSchemaOf, type Projection } from './projection';
import { createTables, lockKeyOf, readCheckpoint } from './store';
import { analyzeSchema } from './statistics';
import { ACCOUNTS_CHANGED_CHANNEL, BUSINESS_CHANGED_CHANNEL, CONTACTS_CHANGED_CHANNEL } from './change-signals';
import { API_KEYS_CHANGED_CHANNEL } from './apikeys/projection';
import { inTransaction, withSessionLock } from '../shared/tx';
import { largestEventEstimate, nextReadSize } from './read-sizes';

export interface RebuildProgress {
  applied: number;
  read: number;
  position: Position;
}

const BATCH = 2000;

/**
 * The read caches' change channels, each told "everything" at a swap: `*` for the business, accounts and contacts
 * caches (src/projections/change-signals.ts); no payload for the API-key cache (src/http/api-key-cache.ts: its
 * payloads are key hashes, so `*` would drop nothing there; regression review 13, 2026-11-28).
 */
const SWAPPED_NOTIFIES: ReadonlyArray<readonly [channel: string, payload: string]> = [
  [BUSINESS_CHANGED_CHANNEL, '*'], [ACCOUNTS_CHANGED_CHANNEL, '*'], [CONTACTS_CHANGED_CHANNEL, '*'], [API_KEYS_CHANGED_CHANNEL, ''],
];
/** at most this many replays up to the head before the locked step (each bounded by the head at its start) */
const CATCH_UP_ROUNDS = 3;

/** Another process holds the projection's rebuild guard: a rebuild of it is running. */
export class RebuildRunningError extends Error {
  override name = 'RebuildRunningError';
  constructor(readonly projection: string) {
    super(`a rebuild of ${projection} is already running`);
  }
}

/**
 * Zero-downtime rebuild: replays the whole log into fresh tables (schema `<schema>__next`) while the live
 * tables keep serving and the live runner keeps advancing them; then, holding the projection's lock, catches
 * up to the live checkpoint and swaps the schemas in one transaction (readers wait for a moment, none fail).
 * Throws when another process is rebuilding the projection.
 */
export async function rebuildProjection(
  pool: Pool,
  store: LogReader,
  p: Projection,
  options: { onProgress?: (progress: RebuildProgress) => void; batchSize?: number },
): Promise<RebuildProgress> {
  const progress = await underRebuildGuard(pool, p, (guard) => replayAndSwap(pool, guard, store, p, options));
  if (progress === 'busy') throw new RebuildRunningError(p.name);
  return progress;
}

/**
 * The rebuild a new `version` of a projection asks for. Every process running the new code asks for it: one
 * rebuilds; the others find it `busy` (the old tables keep serving: ask again later) or, once it is done,
 * `current`. `onStart` is called only when this process starts the rebuild.
 */
export async function rebuildForVersionChange(
  pool: Pool,
  store: LogReader,
  p: Projection,
  onStart: () => void,
): Promise<'rebuilt' | 'current' | 'busy'> {
  return underRebuildGuard(pool, p, async (guard) => {
    // read under the guard: a process that read the old version before another's swap must not rebuild again
    if ((await readCheckpoint(guard, p.name))?.version === p.version) return 'current';
    onStart();
    await replayAndSwap(pool, guard, store, p, {});
    return 'rebuilt';
  });
}

const guardKeyOf = (name: string): string => `rebuild:${name}`;

/**
 * Whether a process holds the projection's rebuild guard: a rebuild of it is running. Read from `pg_locks` (a
 * bigint advisory key is its `classid` and `objid` halves): taking the guard to find out would turn away a rebuild
 * starting at that moment. The stored `rebuilding` state cannot tell: a killed rebuild leaves it, and the live
 * runner's batches overwrite it while a rebuild runs.
 */
export async function rebuildRunning(db: Pool | PoolClient, name: string): Promise<boolean> {
  const r = await db.query<{ running: boolean }>(
    `SELECT EXISTS (
       SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND objsubid = 1 AND granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND ((classid::bigint << 32) | objid::bigint) = hashtext($1)::bigint) AS running`,
    [guardKeyOf(name)],
  );
  return r.rows[0].running;
}

/**
 * Whether a rebuild of `p` stopped before its swap with no process still at it (killed, or its host lost): the
 * checkpoint says `rebuilding` or the fresh schema is left, and nobody holds the guard. The live tables serve as
 * ever; what is left is a partial `<schema>__next` (disk) and a state that says a rebuild runs.
 */
export async function rebuildInterrupted(db: Pool | PoolClient, p: Projection): Promise<boolean> {
  // read again after the guard: a rebuild that swapped and let go of it in between left nothing
  return (await rebuildLeftSomething(db, p)) && !(await rebuildRunning(db, p.name)) && rebuildLeftSomething(db, p);
}

async function rebuildLeftSomething(db: Pool | PoolClient, p: Projection): Promise<boolean> {
  const r = await db.query<{ left: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM projections.checkpoints WHERE name = $1 AND state = 'rebuilding')
         OR EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $2) AS left`,
    [p.name, rebuildSchemaOf(p)],
  );
  return r.rows[0].left;
}

/** What `projections status` says of an interrupted rebuild (`rebuildInterrupted`). */
export const interruptedRebuildNote = (p: Projection): string =>
  `a rebuild stopped before its swap (its process ended): the live tables serve as before; the next start of \`serve\` or `
  + `\`worker\` drops its partial tables (${rebuildSchemaOf(p)}), or run \`switchboard projections rebuild ${p.name}\` again`;

/**
 * What a `projections rebuild` stopped by a signal says: its stop ends the rebuild, which drops its partial tables
 * through its guard's connection before the pools close; only a stop cut short (a second signal, past its time)
 * leaves them, for the next start.
 */
export const stoppedRebuildNote = (p: Projection): string =>
  `the rebuild stops before its swap: the live tables serve as before and its partial tables (${rebuildSchemaOf(p)}) are `
  + `dropped (if this stop is cut short, by the next start of \`serve\` or \`worker\`); run \`switchboard projections rebuild ${p.name}\` again`;

/**
 * Drops what an interrupted rebuild of `p` left (its fresh schema; its `rebuilding` state, back to `running` with
 * a note), holding the guard, so a rebuild running meanwhile is left alone: true when something was cleared.
 * `serve` and `worker` call it at start (a version change's rebuild then starts afresh at the first batch).
 */
export async function clearInterruptedRebuild(pool: Pool, p: Projection): Promise<boolean> {
  if (!(await rebuildInterrupted(pool, p))) return false;
  const cleared = await underRebuildGuard(pool, p, async (guard) => {
    if (!(await rebuildLeftSomething(guard, p))) return false; // another process's rebuild ended in between
    await inTransaction(guard, async (tx) => {
      await tx.query(`DROP SCHEMA IF EXISTS ${rebuildSchemaOf(p)} CASCADE`);
      await tx.query(
        `UPDATE projections.checkpoints SET state = 'running', error = $2, updated_at = now() WHERE name = $1 AND state = 'rebuilding'`,
        [p.name, INTERRUPTED_CLEARED],
      );
    });
    return true;
  });
  return cleared === true;
}

/** The checkpoint's note once an interrupted rebuild's tables are dropped (cleared by the next applied batch). */
export const INTERRUPTED_CLEARED = "an interrupted rebuild's partial tables were dropped at start";

/**
 * Runs `rebuild` holding the projection's rebuild guard (one rebuild of a projection at a time, across
 * processes, held by a session lock); `busy` without running it when another process holds the guard.
 * `rebuild` is given the guard's connection and writes only through it: when that connection is lost (terminated,
 * a proxy's timeout, a network blip that ends that one backend), the guard is gone with it, another process may
 * start the same rebuild into the same fresh schema, and this one's writes must fail rather than go on through the
 * pool on new connections (it used to swap in tables both had written to: events applied twice).
 */
async function underRebuildGuard<T>(pool: Pool, p: Projection, rebuild: (guard: PoolClient) => Promise<T>): Promise<T | 'busy'> {
  const done = await withSessionLock(pool, guardKeyOf(p.name), async (guard) => ({ result: await rebuild(guard) }));
  return done === undefined ? 'busy' : done.result;
}

/**
 * The rebuild itself, under the guard, every write on the guard's connection `guard`: a failure leaves the live
 * tables and records the error.
 */
async function replayAndSwap(
  pool: Pool,
  guard: PoolClient,
  store: LogReader,
  p: Projection,
  options: { onProgress?: (progress: RebuildProgress) => void; batchSize?: number },
): Promise<RebuildProgress> {
  const next = rebuildSchemaOf(p);
  const progress: RebuildProgress = { applied: 0, read: 0, position: START };
  try {
    await inTransaction(guard, async (tx) => {
      await tx.query(`DROP SCHEMA IF EXISTS ${next} CASCADE`);
      await createTables(tx, next, p);
    });
    await guard.query(`UPDATE projections.checkpoints SET state = 'rebuilding', updated_at = now() WHERE name = $1`, [p.name]);

    const batchSize = options.batchSize ?? BATCH;
    // each read sized by the largest event of the last (nextReadSize): batchSize events when they are small
    let size = 1;
    /** Replays from where the fresh tables are until `target` (or until the log holds nothing more yet): events read. */
    const replayTo = async (target: Position, locked?: PoolClient): Promise<number> => {
      let read = 0;
      while (store.comparePositions(progress.position, target) < 0) {
        const batch = await store.readAll(progress.position, size);
        if (batch.events.length === 0) break; // an older open transaction holds the log back: the next step goes on
        size = nextReadSize(size, largestEventEstimate(batch.events), batchSize);
        const apply = async (c: PoolClient) => {
          await c.query(`SET LOCAL synchronous_commit TO off; SET LOCAL search_path TO ${next}, public`);
          progress.applied += await applyHandled(p, c, batch.events);
          await c.query('SET LOCAL search_path TO public');
        };
        if (locked) await apply(locked);
        else await inTransaction(guard, apply);
        read += batch.events.length;
        progress.read += batch.events.length;
        progress.position = batch.nextPosition;
        options.onProgress?.({ ...progress });
      }
      return read;
    };

    // Each round replays up to the head as it was when the round began, never to wherever the log has grown
    // since: under constant appends that tail is never reached. The rounds after the first shorten what is left
    // for the locked step; they stop once a round had at most a batch to read.
    for (let round = 0; round < CATCH_UP_ROUNDS; round++) {
      if ((await replayTo(await store.headPosition())) <= batchSize) break;
    }
    // Fresh tables have no statistics yet: without them the swapped-in read model would be planned as empty.
    await analyzeSchema(pool, next);

    await inTransaction(guard, async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockKeyOf(p.name)]);
      // Under the lock the live checkpoint stands still: the fresh tables reach it (readers never see the swap go
      // back) and not further; the live runner goes on from the swap's position.
      await replayTo((await readCheckpoint(tx, p.name))?.position ?? START, tx);
      await tx.query(`DROP SCHEMA IF EXISTS ${p.schema}__old CASCADE`);
      await tx.query(`ALTER SCHEMA ${p.schema} RENAME TO ${p.schema}__old`);
      await tx.query(`ALTER SCHEMA ${next} RENAME TO ${p.schema}`);
      await tx.query(`DROP SCHEMA ${p.schema}__old CASCADE`);
      await tx.query(
        `UPDATE projections.checkpoints SET position = $2, version = $3, state = 'running', error = NULL, updated_at = now()
          WHERE name = $1`,
        [p.name, progress.position, p.version],
      );
      // the read caches drop everything at the swap's commit: what they hold was read from the tables just dropped
      // (a version change may show other data), and no per-company notification says so
      await tx.query(`SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS n(c, p)`, [
        SWAPPED_NOTIFIES.map(([c]) => c), SWAPPED_NOTIFIES.map(([, p]) => p),
      ]);
    });
    return progress;
  } catch (err) {
    // on the guard's connection too: when it is lost, another rebuild may own the state and the fresh schema now
    await guard
      .query(`UPDATE projections.checkpoints SET state = 'running', error = $2 WHERE name = $1 AND state = 'rebuilding'`, [
        p.name,
        `rebuild failed: ${(err as Error).message}`.slice(0, 2000),
      ])
      .catch(() => undefined);
    await guard.query(`DROP SCHEMA IF EXISTS ${next} CASCADE`).catch(() => undefined); // its partial tables
    throw err;
  }
}


/** Order-independent checksum of a projection's live tables (rebuild and fault tests compare it). */
export async function checksumProjection(pool: Pool, p: Projection, schema = p.schema): Promise<string> {
  const tables = await pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
    [schema],
  );
  const parts: string[] = [];
  for (const { table_name } of tables.rows) {
    const r = await pool.query<{ h: string | null }>(
      `SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) AS h FROM ${schema}.${table_name} t`,
    );
    parts.push(`${table_name}:${r.rows[0].h ?? 'empty'}`);
  }
  return parts.join(',');
}
