import type { Pool } from 'pg';
import type { Position } from '../../ports/event-store';
import { START } from '../../ports/event-store';
import { readCheckpoints } from '../../projections/store';
import type { Services } from '../../services';
import { DomainError } from '../decider';

// Read-your-writes for provisioning, whether or not this process runs the projection runner (`serve` does, the
// CLI does not: its small pool cannot host the runner's loops): advance the read models here with `catchUp`
// (safe beside a running runner: projections advance under advisory locks) and check their checkpoints.

/**
 * The read models did not catch up in time (what was appended is kept). Its message is one line for the
 * operator: the likely cause and what to do.
 */
export class ReadModelsBehindError extends DomainError {
  constructor(message: string) {
    super('READ_MODELS_BEHIND', message);
    this.name = 'ReadModelsBehindError';
  }
}

/**
 * Brings the read models a command validates against (`readModels`, by name) up to what is appended so far. Only
 * those: another may be in a version change's rebuild, which the command would otherwise wait for to its end.
 */
export async function readModelsUpToDate(services: Services, readModels: readonly string[], timeoutMs = 60_000): Promise<void> {
  if (await services.runner.catchUp(Date.now() + timeoutMs, services.runner.named(readModels))) return;
  throw await readModelsBehind(services, `the read models did not catch up with the event log within ${timeoutMs} ms`, true);
}

/**
 * Returns once every read model handling one of `types` has applied everything up to `position`. (`catchUp`
 * alone may stop short: it reads the head below the oldest open transaction.) `target` names `position` in the
 * timeout's message (`the seeded contacts`); without it, the position and the timeout are given.
 */
export async function awaitReadModels(
  services: Services,
  position: Position | undefined,
  types: readonly string[],
  timeoutMs = 60_000,
  target?: string,
): Promise<void> {
  if (!position) return;
  const projections = services.runner.affectedBy(types);
  const affected = projections.map((p) => p.name);
  if (affected.length === 0) return;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const caughtUp = await services.runner.catchUp(deadline, projections);
    const rows = (await readCheckpoints(services.pool)).filter((cp) => affected.includes(cp.name));
    const passed = rows.length === affected.length
      && rows.every((cp) => cp.position !== START && services.store.comparePositions(cp.position, position) >= 0);
    if (passed) return;
    if (Date.now() > deadline) {
      const missed = target === undefined ? `${position} within ${timeoutMs} ms` : `${target} in time`;
      throw await readModelsBehind(services, `read models ${affected.join(', ')} did not reach ${missed}`, !caughtUp);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The timeout as the operator reads it: `what` did not happen, why, and what to do. `heldBack`: catch-up gave up
 * behind the head of the log, so the oldest writing transaction of this database is named (readers cannot pass
 * anything committed after it began writing; another database's stops holding them after a moment: docs/core.md).
 */
export async function readModelsBehind(services: Services, what: string, heldBack: boolean): Promise<ReadModelsBehindError> {
  const holder = heldBack ? await oldestWritingTransaction(services.pool).catch(() => undefined) : undefined;
  if (!holder) return new ReadModelsBehindError(`${what}; \`switchboard projections status\` shows a failing projection and its error`);
  return new ReadModelsBehindError(
    `${what}: a transaction open for ${holder.openForS} s (pid ${holder.pid}, database ${holder.database}) holds the event log back; `
      + `end it (commit or roll it back, or SELECT pg_terminate_backend(${holder.pid})), then run the command again`,
  );
}

async function oldestWritingTransaction(pool: Pool): Promise<{ pid: number; database: string; openForS: number } | undefined> {
  const r = await pool.query<{ pid: number; database: string; open_for_s: number }>(
    `SELECT pid, datname AS database, floor(extract(epoch FROM now() - xact_start))::int AS open_for_s
       FROM pg_stat_activity
      WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() AND datname = current_database()
      ORDER BY age(backend_xid) DESC
      LIMIT 1`,
  );
  const row = r.rows[0];
  return row && { pid: row.pid, database: row.database, openForS: row.open_for_s };
}
