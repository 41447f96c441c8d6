// The bulk jobs' rows in the work table (bulk_work.jobs): creating a draft, state changes, pause, heartbeat,
// cancel requests, and which numbers and jobs have work now.
import type { Pool } from 'pg';
import type { TemplateShape } from '../send/components';
import { BULK_CANCEL_CHANNEL } from './signals';

export type JobState = 'draft' | 'queued' | 'processing' | 'finished' | 'cancelled';

export interface JobRow {
  bulkId: string;
  taskId: string;
  companyId: number;
  numberId: number;
  phoneNumberId: string;
  templateName: string;
  language: string;
  template: TemplateShape;
  chunkCount: number;
  recipientCount: number;
  materializedChunks: number;
  state: JobState;
  cancelRequested: boolean;
  paused: boolean;
  pausedUntil: Date | null;
  createdAt: Date;
}

const toJob = (r: any): JobRow => ({
  bulkId: r.bulk_id,
  taskId: r.task_id,
  companyId: r.company_id,
  numberId: r.number_id,
  phoneNumberId: r.phone_number_id,
  templateName: r.template_name,
  language: r.language,
  template: r.template,
  chunkCount: r.chunk_count,
  recipientCount: r.recipient_count,
  materializedChunks: r.materialized_chunks,
  state: r.state,
  cancelRequested: r.cancel_requested,
  paused: r.paused,
  pausedUntil: r.paused_until,
  createdAt: r.created_at,
});

// ---------------------------------------------------------------- jobs

export async function insertDraftJob(
  pool: Pool,
  job: Omit<JobRow, 'materializedChunks' | 'state' | 'cancelRequested' | 'paused' | 'pausedUntil'>,
): Promise<void> {
  await pool.query(
    `INSERT INTO bulk_work.jobs (bulk_id, task_id, company_id, number_id, phone_number_id, template_name, language, template,
                                 chunk_count, recipient_count, state, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'draft', $11, $11)`,
    [job.bulkId, job.taskId, job.companyId, job.numberId, job.phoneNumberId, job.templateName, job.language, JSON.stringify(job.template),
      job.chunkCount, job.recipientCount, job.createdAt],
  );
}

export async function setJobState(pool: Pool, bulkId: string, state: JobState, now: Date, onlyFrom?: readonly JobState[]): Promise<boolean> {
  const r = onlyFrom
    ? await pool.query('UPDATE bulk_work.jobs SET state = $2, updated_at = $3 WHERE bulk_id = $1 AND state = ANY($4::text[])', [bulkId, state, now, onlyFrom])
    : await pool.query('UPDATE bulk_work.jobs SET state = $2, updated_at = $3 WHERE bulk_id = $1', [bulkId, state, now]);
  return (r.rowCount ?? 0) > 0;
}

export async function getJob(pool: Pool, bulkId: string): Promise<JobRow | undefined> {
  const r = await pool.query('SELECT * FROM bulk_work.jobs WHERE bulk_id = $1', [bulkId]);
  return r.rows[0] ? toJob(r.rows[0]) : undefined;
}

/** Numbers with work (oldest job first): queued or processing, not cancelled, not paused past `now`. */
export async function numbersWithWork(pool: Pool, now: Date, limit = 100): Promise<number[]> {
  const r = await pool.query<{ number_id: number }>(
    `SELECT number_id FROM (
       SELECT number_id, min(created_at) AS oldest FROM bulk_work.jobs
        WHERE state IN ('queued', 'processing') AND NOT cancel_requested AND (paused_until IS NULL OR paused_until <= $1)
        GROUP BY number_id) x
      ORDER BY oldest LIMIT $2`,
    [now, limit],
  );
  return r.rows.map((x) => x.number_id);
}

/** The oldest job of a number that can be worked on now. */
export async function nextJobOfNumber(pool: Pool, numberId: number, now: Date): Promise<JobRow | undefined> {
  const r = await pool.query(
    `SELECT * FROM bulk_work.jobs
      WHERE number_id = $1 AND state IN ('queued', 'processing') AND NOT cancel_requested AND (paused_until IS NULL OR paused_until <= $2)
      ORDER BY created_at, bulk_id LIMIT 1`,
    [numberId, now],
  );
  return r.rows[0] ? toJob(r.rows[0]) : undefined;
}

export async function setJobPaused(pool: Pool, bulkId: string, paused: boolean, until: Date | null, now: Date): Promise<void> {
  await pool.query('UPDATE bulk_work.jobs SET paused = $2, paused_until = $3, updated_at = $4 WHERE bulk_id = $1', [bulkId, paused, until, now]);
}

export async function heartbeat(pool: Pool, bulkId: string, now: Date): Promise<void> {
  await pool.query('UPDATE bulk_work.jobs SET heartbeat_at = $2 WHERE bulk_id = $1', [bulkId, now]);
}

/**
 * Stops further claims at once (the cancel command, before its event), and tells the dispatchers of every process
 * (BULK_CANCEL_CHANNEL, on commit) to drop the rest of the window they hold.
 */
export async function requestCancel(pool: Pool, bulkId: string, now: Date): Promise<void> {
  await pool.query(
    `WITH flagged AS (
       UPDATE bulk_work.jobs SET cancel_requested = true, updated_at = $2 WHERE bulk_id = $1 AND state NOT IN ('finished', 'cancelled')
       RETURNING bulk_id)
     SELECT pg_notify($3, bulk_id::text) FROM flagged`,
    [bulkId, now, BULK_CANCEL_CHANNEL],
  );
}

/** Those of `bulkIds` whose cancel was requested (a dispatcher that may have missed their notification). */
export async function cancelRequestedAmong(pool: Pool, bulkIds: readonly string[]): Promise<string[]> {
  const r = await pool.query<{ bulk_id: string }>('SELECT bulk_id FROM bulk_work.jobs WHERE bulk_id = ANY($1::uuid[]) AND cancel_requested', [bulkIds]);
  return r.rows.map((x) => x.bulk_id);
}
