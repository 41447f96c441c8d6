// Materialization: copies a job's chunk streams (BulkRecipientsAdded) into work rows (bulk_work.recipients).
import type { BulkEventData } from '../../events/bulk';
import type { Services } from '../../services';
import { normalizePhone } from '../../shared/phone';
import { withTransaction } from '../../shared/tx';
import { mapInTurns, Turns } from '../../shared/turns';
import { chunkStreamId } from './decider';

// ---------------------------------------------------------------- materialization (chunk streams → rows)

/**
 * Copies the next `maxChunks` chunk streams of a job into work rows (phones normalized to E.164 for the
 * quota), under the job's row lock; idempotent. Returns the number of chunks now materialized.
 * The chunk events carry each phone as the client sent it (events/bulk.ts: `+54…` without the 9 among them), so the
 * E.164 form is computed here again; in slices that give the event loop a turn between them (docs/bulk.md, "Event
 * loop"). The recipients are deduplicated, so their phone texts are distinct: no memo.
 */
export async function materializeChunks(services: Services, bulkId: string, maxChunks: number): Promise<number> {
  return withTransaction(services.pool, async (client) => {
    const r = await client.query(
      'SELECT number_id, chunk_count, materialized_chunks FROM bulk_work.jobs WHERE bulk_id = $1 FOR UPDATE',
      [bulkId],
    );
    const job = r.rows[0];
    if (!job) return 0;
    const upTo = Math.min(job.chunk_count, job.materialized_chunks + maxChunks);
    const turns = new Turns();
    for (let chunk = job.materialized_chunks; chunk < upTo; chunk++) {
      const events = await services.store.readStream(chunkStreamId(bulkId, chunk));
      const added = events.find((e) => e.type === 'BulkRecipientsAdded');
      if (!added) throw new Error(`bulk ${bulkId}: chunk ${chunk} has no BulkRecipientsAdded event`);
      const d = added.data as BulkEventData<'BulkRecipientsAdded'>;
      const e164s = await mapInTurns(d.recipients, (x) => normalizePhone(x.phone) ?? x.phone, turns);
      await client.query(
        `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables)
         SELECT $1, r.idx, $2, $3, r.phone, r.e164, r.variables, r.button_variables
           FROM unnest($4::int[], $5::text[], $6::text[], $7::jsonb[], $8::jsonb[]) AS r(idx, phone, e164, variables, button_variables)
         ON CONFLICT (bulk_id, idx) DO NOTHING`,
        [
          bulkId, chunk, job.number_id,
          d.recipients.map((x) => x.index),
          d.recipients.map((x) => x.phone),
          e164s,
          d.recipients.map((x) => JSON.stringify(x.variables)),
          d.recipients.map((x) => JSON.stringify(x.buttonVariables)),
        ],
      );
    }
    await client.query('UPDATE bulk_work.jobs SET materialized_chunks = $2 WHERE bulk_id = $1', [bulkId, upTo]);
    return upTo;
  });
}
