import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Pool, PoolClient } from 'pg';
import { inTransaction } from '../../shared/tx';

const MIGRATIONS_DIR = join(__dirname, 'migrations');
const LOCK_KEY = 7_246_001; // advisory lock: one migrator at a time across processes

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migrations in `dir`, by version; two files of one version (a stale build's copy of a renamed one) are refused. */
export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  const migrations = readdirSync(dir)
    .filter((f) => /^\d{4}_.+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 4)), name: f.slice(5, -4), sql: readFileSync(join(dir, f), 'utf8') }));
  const twin = migrations.find((m, i) => i > 0 && migrations[i - 1].version === m.version);
  if (twin) {
    const names = migrations.filter((m) => m.version === twin.version).map((m) => `${String(m.version).padStart(4, '0')}_${m.name}.sql`);
    throw new Error(`two migrations have version ${twin.version} in ${dir} (${names.join(', ')}): a stale build? Rebuild with npm run build`);
  }
  return migrations;
}

/**
 * How long the migrations' lock's session may sit idle before Postgres ends it, and the lock with it (2026-11-28,
 * review 16b): a process paused or frozen while holding it (SIGSTOP, `docker pause`, a VM freeze) held it for as long
 * as it stayed so, and every other start (`serve`, `worker`) and CLI command waited for it, saying nothing. The
 * migrator is never idle for long while it holds the lock (its statements run back to back; a long one is active,
 * not idle; a migration's own transaction has the pools' idle_in_transaction_session_timeout), so no heartbeat.
 * Postgres 14 and later (an older server keeps the lock as before, no bound).
 */
export const MIGRATIONS_LOCK_IDLE_TIMEOUT_MS = 30_000;
/** How long a start waits for the lock before it says who holds it, and how often it says so again. */
const WAITING_REPORT_MS = 10_000;

// Taking the lock answers the session's own idle_session_timeout (`previous`, read before it is changed: OFFSET 0
// keeps it a subquery of its own), which giving the lock back restores (as src/shared/tx.ts's session locks).
const takeLock = (lock: string) => `SELECT ok, previous,
    CASE WHEN ok AND previous IS NOT NULL THEN set_config('idle_session_timeout', '${MIGRATIONS_LOCK_IDLE_TIMEOUT_MS}', false) END
  FROM (SELECT ${lock} AS ok, current_setting('idle_session_timeout', true) AS previous OFFSET 0) t`;
const TRY_LOCK = takeLock('pg_try_advisory_lock($1)');
const WAIT_LOCK = takeLock('pg_advisory_lock($1)::text IS NOT NULL'); // void: true once it is held
const UNLOCK = `SELECT pg_advisory_unlock($1), CASE WHEN $2::text IS NOT NULL THEN set_config('idle_session_timeout', $2::text, false) END`;
/** The sessions holding the lock (bigint key: classid is its high half, objid its low half, objsubid 1). */
const HOLDERS = `SELECT a.pid, a.application_name, host(a.client_addr) AS client_addr, a.state,
    round(extract(epoch FROM now() - a.state_change))::int AS state_for_s
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = 0 AND l.objid = $1 AND l.objsubid = 1`;

/** The session holding the migrations' lock, as `pg_stat_activity` shows it. */
export interface MigrationsLockHolder {
  pid: number;
  application_name: string;
  client_addr: string | null;
  state: string | null;
  /** seconds in that state */
  state_for_s: number | null;
}

export interface MigrateOptions {
  /**
   * Told once this start has waited 10 s for the lock, then every 10 s while it waits (the holder, if it could be
   * read): for a log line, so that a start waiting for another process's migrations says so.
   */
  onWaiting?: (holder: MigrationsLockHolder | undefined, waitedMs: number) => void;
}

/** Applies pending versioned SQL migrations, each in its own transaction, under an advisory lock. */
export async function migrate(pool: Pool, options: MigrateOptions = {}): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  let taken: { ok: boolean; previous: string | null } | undefined;
  let broken: Error | undefined;
  try {
    taken = (await client.query<{ ok: boolean; previous: string | null }>(TRY_LOCK, [LOCK_KEY])).rows[0];
    if (!taken.ok) taken = await waitForLock(pool, client, options);
    await client.query(
      `CREATE TABLE IF NOT EXISTS public.schema_migrations (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set(
      (await client.query<{ version: number }>('SELECT version FROM public.schema_migrations')).rows.map((r) => r.version),
    );
    for (const m of loadMigrations()) {
      if (done.has(m.version)) continue;
      // on the client holding the migrations' session lock
      await inTransaction(client, async (tx) => {
        await tx.query(m.sql);
        await tx.query('INSERT INTO public.schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      }).catch((err: Error & { code?: string }) => {
        // the code kept: a lost connection (the session ended while paused, say) is a transient failure, tried again
        throw Object.assign(new Error(`migration ${m.version}_${m.name} failed: ${err.message}`), { code: err.code });
      });
      applied.push(m.version);
    }
  } finally {
    // a connection that cannot unlock is closed rather than pooled, so it cannot keep the lock
    if (taken?.ok) await client.query(UNLOCK, [LOCK_KEY, taken.previous]).catch((err: Error) => (broken = err));
    client.release(broken);
  }
  return applied;
}

async function waitForLock(pool: Pool, client: PoolClient, options: MigrateOptions): Promise<{ ok: boolean; previous: string | null }> {
  const since = Date.now();
  const report = () => {
    if (!options.onWaiting) return;
    pool.query<MigrationsLockHolder>(HOLDERS, [LOCK_KEY]).then(
      (r) => options.onWaiting?.(r.rows[0], Date.now() - since),
      () => options.onWaiting?.(undefined, Date.now() - since),
    );
  };
  // not at once: many processes starting together wait a moment for each other, and a one-shot command's warning
  // there went into its output (`events export`'s NDJSON on stdout: a line without an event)
  const timer = setInterval(report, WAITING_REPORT_MS);
  timer.unref();
  try {
    return (await client.query<{ ok: boolean; previous: string | null }>(WAIT_LOCK, [LOCK_KEY])).rows[0];
  } finally {
    clearInterval(timer);
  }
}
