// Reads of the work rows (bulk_work.recipients): a job's progress, and the owner of a provider message id.
import type { Pool } from 'pg';

export interface JobProgress {
  pending: number;
  /** pending but waiting for a retry */
  delayed: number;
  nextAttemptAt: Date | null;
  inFlight: number;
  sent: number;
  failed: number;
  /** outcome batches not appended yet */
  unappended: number;
}

export async function jobProgress(pool: Pool, bulkId: string, now: Date): Promise<JobProgress> {
  const r = await pool.query(
    `SELECT count(*) FILTER (WHERE state = 'pending')::int AS pending,
            count(*) FILTER (WHERE state = 'pending' AND next_attempt_at > $2)::int AS delayed,
            min(next_attempt_at) FILTER (WHERE state = 'pending' AND next_attempt_at > $2) AS next_attempt_at,
            count(*) FILTER (WHERE state = 'in_flight')::int AS in_flight,
            count(*) FILTER (WHERE state = 'sent')::int AS sent,
            count(*) FILTER (WHERE state = 'failed')::int AS failed,
            (SELECT count(*)::int FROM bulk_work.outcome_batches b WHERE b.bulk_id = $1) AS unappended
       FROM bulk_work.recipients WHERE bulk_id = $1`,
    [bulkId, now],
  );
  const x = r.rows[0];
  return {
    pending: x.pending, delayed: x.delayed, nextAttemptAt: x.next_attempt_at, inFlight: x.in_flight, sent: x.sent, failed: x.failed,
    unappended: x.unappended,
  };
}

/** The owner of a provider message id in the work table, once its outcome event is stored. */
export async function findWorkRecipientByProviderId(
  pool: Pool,
  providerMessageId: string,
): Promise<{ bulkId: string; companyId: number; chunk: number; index: number } | undefined> {
  const r = await pool.query(
    `SELECT r.bulk_id, r.chunk, r.idx, j.company_id FROM bulk_work.recipients r JOIN bulk_work.jobs j ON j.bulk_id = r.bulk_id
      WHERE r.provider_message_id = $1
        AND NOT EXISTS (SELECT 1 FROM bulk_work.outcome_batches b WHERE b.bulk_id = r.bulk_id AND r.idx = ANY(b.idxs))`,
    [providerMessageId],
  );
  const row = r.rows[0];
  return row ? { bulkId: row.bulk_id, companyId: row.company_id, chunk: row.chunk, index: row.idx } : undefined;
}
