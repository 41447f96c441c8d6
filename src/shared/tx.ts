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
