import { randomBytes } from 'node:crypto';
import { Client, type Pool } from 'pg';
import { createPool } from '../../src/adapters/postgres/pool';
import { migrate } from '../../src/adapters/postgres/migrations';

export interface TestDatabase {
  url: string;
  pool: Pool;
  /** closes the pool and drops the database */
  drop(): Promise<void>;
}

function serverUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: run the tests through jest (global setup starts Postgres)');
  return url;
}

export function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/** A fresh, migrated database per test file on the run's Postgres (embedded, or DATABASE_URL). */
export async function createTestDatabase(options: { migrate?: boolean; poolSize?: number } = {}): Promise<TestDatabase> {
  const name = `sbt_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: serverUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(serverUrl(), name);
  const pool = createPool(url, options.poolSize ?? 10);
  if (options.migrate !== false) await migrate(pool);
  return {
    url,
    pool,
    async drop() {
      await pool.end().catch(() => undefined);
      const c = new Client({ connectionString: serverUrl() });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * Waits until every event committed so far is readable: below the log's horizon, the oldest transaction still running
 * anywhere on the cluster (another test file's may be: a long insert). A one-shot `events export` writes what is
 * readable now and ends (docs/event-log.md), so an export run at once after a suite's inserts, beside another
 * file's open transaction, exported none of them.
 */
export async function eventLogReadable(pool: Pool, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query<{ ok: boolean }>(
      `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint > coalesce((SELECT max(tx_id) FROM es.events), 0) AS ok`,
    );
    if (rows[0].ok) return;
    if (Date.now() > deadline) throw new Error(`the event log was not readable within ${timeoutMs} ms: a transaction stays open on the cluster`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
