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

async function holdingSessionLock<T>(pool: Pool, name: string, take: 'try' | 'wait', fn: (lock: PoolClient) => Promise<T>): Promise<T | undefined> {
  const lock = await pool.connect();
  let broken: Error | undefined;
  try {
    if (take === 'wait') await lock.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
    else if (!(await lock.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [name])).rows[0].ok) return undefined;
    try {
      return await fn(lock);
    } finally {
      // a connection that cannot unlock is closed rather than pooled, so it cannot keep the lock
      await lock.query('SELECT pg_advisory_unlock(hashtext($1))', [name]).catch((err: Error) => (broken = err));
    }
  } finally {
    lock.release(broken);
  }
}
