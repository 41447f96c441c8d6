import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { EventToAppend } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';

// What the projection-runner suites drive the runner with (test/integration/projection-runner.test.ts, the
// regress-review21-* suites): a bare event, and a projection that counts the `Counted` events of each stream.

/** An event of `type` carrying `data`, with fresh ids (company 1, a fixed time). */
export const testEvent = (type: string, data: unknown): EventToAppend => {
  const id = randomUUID();
  return { type, data, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: '2026-01-01T00:00:00.000Z' } };
};

/**
 * A non-idempotent test projection, `name` (default 'tally', schema `rm_<name>`): it counts the `Counted` events of
 * each stream, so counting proves each event is applied exactly once. `failOnce`: the first apply of the event whose
 * `data.tag` is that throws (`failed` then true).
 */
export function tallyProjection(opts: { failOnce?: string; name?: string } = {}): Projection & { failed: boolean } {
  const p = {
    name: opts.name ?? 'tally',
    version: 1,
    schema: `rm_${opts.name ?? 'tally'}`,
    handles: ['Counted'],
    failed: false,
    ddl: 'CREATE TABLE IF NOT EXISTS counts (stream text PRIMARY KEY, n integer NOT NULL)',
    async apply(tx: any, e: any) {
      if (opts.failOnce && e.data.tag === opts.failOnce && !p.failed) {
        p.failed = true;
        throw new Error('injected failure mid-batch');
      }
      await tx.query('INSERT INTO counts (stream, n) VALUES ($1, 1) ON CONFLICT (stream) DO UPDATE SET n = counts.n + 1', [e.streamId]);
    },
  };
  return p;
}

/** What tally projection `name` has counted: stream → events applied. */
export async function tallyCounts(pool: Pool, name = 'tally'): Promise<Record<string, number>> {
  const r = await pool.query<{ stream: string; n: number }>(`SELECT stream, n FROM rm_${name}.counts`);
  return Object.fromEntries(r.rows.map((x) => [x.stream, x.n]));
}
