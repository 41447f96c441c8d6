import type { Pool } from 'pg';

export interface StatisticsLogger {
  warn(obj: object, msg?: string): void;
}

/**
 * Tables of these schemas that grew by more than their size at their last analysis (pg_class.reltuples; -1 when
 * never analyzed) plus `minGrowth` rows, with their indexed columns: the ones lookups and joins filter on. Analyzing
 * only them keeps an ANALYZE of a table with large json columns cheap. (Growth, not pg_stat's changes since the last
 * analysis: an ANALYZE of some columns does not reset that counter.)
 */
const OUTDATED_SQL = `
SELECT format('%I.%I', s.schemaname, s.relname) AS name,
       (SELECT string_agg(DISTINCT quote_ident(a.attname), ', ')
          FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
         WHERE i.indrelid = s.relid) AS columns
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
 WHERE s.schemaname = ANY($1::text[])
   AND s.n_live_tup - GREATEST(c.reltuples, 0) >= GREATEST(c.reltuples, 0) + $2`;

/** Analyzes every table of a schema (a rebuilt read model before it goes live). */
export async function analyzeSchema(pool: Pool, schema: string): Promise<void> {
  const tables = await pool.query<{ name: string }>(
    `SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = $1`,
    [schema],
  );
  if (tables.rows.length > 0) await pool.query(`ANALYZE ${tables.rows.map((r) => r.name).join(', ')}`);
}

/**
 * Keeps the planner's statistics of young tables current. Autovacuum analyzes a table once a tenth of it changed,
 * but looks only once a minute (autovacuum_naptime): a read model or event table that grows from empty meanwhile
 * keeps the plans made when it was tiny (a prepared statement's generic plan is only re-made after an ANALYZE),
 * and a sequential scan chosen for ten rows then reads thousands on every batch. This looks every `intervalMs` and
 * analyzes the tables that more than doubled since their last analysis; a grown table (growth far below its size)
 * is left to autovacuum.
 */
export class StatisticsKeeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly schemas: readonly string[],
    private readonly options: { intervalMs?: number; minGrowth?: number; logger?: StatisticsLogger } = {},
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.refresh()
        .then(() => undefined, (err) => this.options.logger?.warn({ err }, 'could not refresh table statistics'))
        .finally(() => (this.running = undefined));
    }, this.options.intervalMs ?? 2000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Analyzes the outdated tables now: their names. */
  async refresh(): Promise<string[]> {
    const outdated = await this.pool.query<{ name: string; columns: string | null }>(OUTDATED_SQL, [this.schemas, this.options.minGrowth ?? 1000]);
    // SKIP_LOCKED: a table being dropped or swapped by a rebuild is skipped, not waited for.
    if (outdated.rows.length > 0) {
      await this.pool.query(`ANALYZE (SKIP_LOCKED) ${outdated.rows.map((r) => (r.columns ? `${r.name} (${r.columns})` : r.name)).join(', ')}`);
    }
    return outdated.rows.map((r) => r.name);
  }
}
