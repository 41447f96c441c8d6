import type { Pool, PoolClient } from 'pg';

export async function withTransaction<T>(pool: Pool, fn: (tx: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await inTransaction(client, fn);
  } finally {
    client.release();
  }
}

/** A transaction on a connection the caller holds (one that keeps a session lock across transactions, say). */
export async function inTransaction<T>(client: PoolClient, fn: (tx: PoolClient) => Promise<T>): Promise<T> {
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/**
 * A statement as a named prepared statement: Postgres parses and plans it once per connection (re-planning by
 * itself when the tables or the search_path change). For hot statements with constant text only.
 */
export function queryNamed(db: Pool | PoolClient, name: string, text: string, values: unknown[]) {
  return db.query({ name, text, values });
}

/**
 * Runs `fn` holding a session advisory lock on `name`, on a connection of its own; undefined (and `fn` not run)
 * when another session holds it. For periodic jobs that any process may run, one at a time.
 */
export function withSessionLock<T>(pool: Pool, name: string, fn: (lock: PoolClient) => Promise<T>): Promise<T | undefined> {
  return holdingSessionLock(pool, name, 'try', fn);
}

/** Runs `fn` holding a session advisory lock on `name`, on a connection of its own, waiting for it if need be. */
export async function waitingForSessionLock<T>(pool: Pool, name: string, fn: (lock: PoolClient) => Promise<T>): Promise<T> {
  return (await holdingSessionLock(pool, name, 'wait', fn)) as T;
}

/**
 * How long a session lock's connection may sit idle before Postgres ends its session (2026-11-28, review 15f): a
 * process paused or frozen while holding one (SIGSTOP, `docker pause`, a VM or GC freeze) held it for as long as it
 * stayed so: every other process's endpoint creation of that company waited for it, and the periodic jobs stopped.
 * A live holder says it is there every SESSION_LOCK_HEARTBEAT_MS, however long its work lasts; a paused one cannot.
 */
export const SESSION_LOCK_IDLE_TIMEOUT_MS = 30_000;
const SESSION_LOCK_HEARTBEAT_MS = 10_000;

// idle_session_timeout exists from Postgres 14 on (an older server keeps the lock as before, no bound). Taking the
// lock answers the session's own value (`previous`, computed before it is changed: OFFSET 0 keeps it a subquery of
// its own), which giving the lock back restores: reading it from pg_settings there cost about 0.9 ms a release.
const takeLock = (lock: string) => `SELECT ok, previous,
    CASE WHEN ok AND previous IS NOT NULL THEN set_config('idle_session_timeout', '${SESSION_LOCK_IDLE_TIMEOUT_MS}', false) END
  FROM (SELECT ${lock} AS ok, current_setting('idle_session_timeout', true) AS previous OFFSET 0) t`;
const TRY_LOCK = takeLock('pg_try_advisory_lock(hashtext($1))');
const WAIT_LOCK = takeLock('pg_advisory_lock(hashtext($1))::text IS NOT NULL'); // void: true once it is held
const UNLOCK = `SELECT pg_advisory_unlock(hashtext($1)), CASE WHEN $2::text IS NOT NULL THEN set_config('idle_session_timeout', $2::text, false) END`;

async function holdingSessionLock<T>(pool: Pool, name: string, take: 'try' | 'wait', fn: (lock: PoolClient) => Promise<T>): Promise<T | undefined> {
  const lock = await pool.connect();
  let broken: Error | undefined;
  try {
    const taken = (await lock.query<{ ok: boolean; previous: string | null }>(take === 'wait' ? WAIT_LOCK : TRY_LOCK, [name])).rows[0];
    if (!taken.ok) return undefined;
    // queued behind the holder's own statements on the connection, if any: it changes nothing but the idle time
    const heartbeat = setInterval(() => void lock.query('SELECT 1').catch(() => undefined), SESSION_LOCK_HEARTBEAT_MS);
    heartbeat.unref();
    try {
      return await fn(lock);
    } finally {
      clearInterval(heartbeat);
      // a connection that cannot unlock is closed rather than pooled, so it cannot keep the lock
      await lock.query(UNLOCK, [name, taken.previous]).catch((err: Error) => (broken = err));
    }
  } finally {
    lock.release(broken);
  }
}
