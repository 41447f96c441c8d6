import type { Pool } from 'pg';
import type { RecordedEvent } from '../../src/ports/event-store';
import { applyHandled, type Projection } from '../../src/projections/projection';
import { createTables } from '../../src/projections/store';
import { withTransaction } from '../../src/shared/tx';

/** Fills a fresh schema with projection `p` from `batches` of the log, one transaction per batch (as the runner does). */
export async function fillProjection(pool: Pool, p: Projection, schema: string, batches: RecordedEvent[][]): Promise<void> {
  await withTransaction(pool, async (tx) => {
    await tx.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await createTables(tx, schema, p);
  });
  for (const batch of batches) {
    await withTransaction(pool, async (tx) => {
      await tx.query(`SET LOCAL search_path TO ${schema}, public`);
      await applyHandled(p, tx, batch);
    });
  }
}

/** The log cut into batches of `size` events. */
export const chunksOf = (events: RecordedEvent[], size: number): RecordedEvent[][] =>
  Array.from({ length: Math.ceil(events.length / size) }, (_, i) => events.slice(i * size, (i + 1) * size));
