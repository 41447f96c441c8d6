// The SQL a projection batch's transaction opens with (the projection's lock, its settings, its checkpoint), how
// its result is read, and the literal quoting the runner's own statements use.
import type { Position } from '../ports/event-store';
import type { Projection } from '../projections/projection';
import { lockKeyOf } from '../projections/store';

/** A SQL string literal (standard_conforming_strings): for the runner's own names and positions, never user input. */
export const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;

export interface OpenedRow {
  ok: boolean;
  position: Position;
  version: number;
}

/**
 * The first statements of a batch's transaction: the projection's lock (without waiting) with the transaction's
 * settings, made by set_config(…, true) (transaction-local, as SET LOCAL) in the same statement; then its stored
 * checkpoint. Derived data: rows and checkpoint commit together, so a batch lost in a server crash is re-applied
 * from the log, and the commit need not wait for the WAL flush (event appends themselves stay synchronous).
 * Generic plans: a projection's statements are keyed writes whose plan does not depend on the values, and
 * planning its larger set-form statements each time cost more than running them; their plans stay current, as
 * the statistics keeper analyzes young tables as they grow and an ANALYZE re-plans.
 * A batch's transaction idle past the pool's `idle_in_transaction_session_timeout` (30 s, src/adapters/postgres/pool.ts)
 * is ended by Postgres: a process paused or frozen inside one (SIGSTOP, `docker pause`, a VM freeze) held the
 * projection's lock for as long as it stayed so, and with it every other process's batches of that projection and
 * every CLI command and start-up (review 15a). A batch's own gaps are milliseconds of JavaScript, far from it.
 */
export const openingStatement = (p: Projection): string =>
  `SELECT pg_try_advisory_xact_lock(hashtext(${literal(lockKeyOf(p.name))})) AS ok,
          set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true),
          set_config('search_path', ${literal(`${p.schema}, public`)}, true);
   SELECT position, version FROM projections.checkpoints WHERE name = ${literal(p.name)}`;
// The checkpoint is read by a statement of its own, after the lock is held: read committed takes a statement's
// snapshot when it starts, so a read in the locking statement could miss a batch another process committed while
// this one waited for the lock, and apply that batch again.

/** What the opening statements returned, from the results of a multi-statement query that ends with them. */
export const openedRow = (results: unknown): OpenedRow | undefined => {
  const all = results as Array<{ rows: Array<Record<string, unknown>> }>;
  const lock = all[all.length - 2].rows[0];
  const checkpoint = all[all.length - 1].rows[0];
  return lock && checkpoint ? { ok: lock.ok as boolean, position: checkpoint.position as Position, version: checkpoint.version as number } : undefined;
};
