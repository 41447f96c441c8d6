import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Pool } from 'pg';
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

/** Applies pending versioned SQL migrations, each in its own transaction, under an advisory lock. */
export async function migrate(pool: Pool): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
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
      }).catch((err: Error) => {
        throw new Error(`migration ${m.version}_${m.name} failed: ${err.message}`);
      });
      applied.push(m.version);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => undefined);
    client.release();
  }
  return applied;
}
