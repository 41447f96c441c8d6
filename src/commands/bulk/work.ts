// The dispatcher's work table (bulk_work.*, migration 0003_bulk.sql) and the events derived from it
// (docs/bulk.md, "Dispatcher"). Command-side state: written only by the bulk commands, the dispatcher and the
// lease sweep. Every outcome is written here first, in the same statement as its outcome batch (per window,
// chunk and kind); the batch is then appended as one event whose id is derived from the batch, and deleted.
// A crash in between leaves the batch, which the next flush appends again (the event store recognises the
// re-append), so every recipient ends up in exactly one outcome event.
import type { Pool, PoolClient } from 'pg';
import type { EventToAppend } from '../../ports/event-store';
import type { BulkEventData } from '../../events/bulk';
import { QUOTA_WINDOW_MS } from '../../projections/accounts/queries';
import type { Services } from '../../services';
import { normalizePhone } from '../../shared/phone';
import type { TemplateShape } from '../send/components';
import { deterministicUuid } from '../send/ids';
import { chunkStreamId } from './decider';

export const INTERRUPTED_CODE = 'interrupted';
export const INTERRUPTED_MESSAGE = 'interrupted, outcome unknown';

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

/** Stops further claims at once (the cancel command, before its event). */
export async function requestCancel(pool: Pool, bulkId: string, now: Date): Promise<void> {
  await pool.query(
    `UPDATE bulk_work.jobs SET cancel_requested = true, updated_at = $2 WHERE bulk_id = $1 AND state NOT IN ('finished', 'cancelled')`,
    [bulkId, now],
  );
}

// ---------------------------------------------------------------- number leases (pacing of spaced tiers)

export async function acquireNumberLease(pool: Pool, numberId: number, owner: string, now: Date, leaseMs: number): Promise<boolean> {
  const r = await pool.query(
    `INSERT INTO bulk_work.number_leases (number_id, owner, lease_until) VALUES ($1, $2, $3)
     ON CONFLICT (number_id) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
      WHERE bulk_work.number_leases.owner = EXCLUDED.owner OR bulk_work.number_leases.lease_until < $4
     RETURNING owner`,
    [numberId, owner, new Date(now.getTime() + leaseMs), now],
  );
  return (r.rowCount ?? 0) > 0;
}

export async function releaseNumberLease(pool: Pool, numberId: number, owner: string): Promise<void> {
  await pool.query('DELETE FROM bulk_work.number_leases WHERE number_id = $1 AND owner = $2', [numberId, owner]);
}

// ---------------------------------------------------------------- materialization (chunk streams → rows)

/**
 * Copies the next `maxChunks` chunk streams of a job into work rows (phones normalized to E.164 for the
 * quota), under the job's row lock; idempotent. Returns the number of chunks now materialized.
 */
export async function materializeChunks(services: Services, bulkId: string, maxChunks: number): Promise<number> {
  const client = await services.pool.connect();
  try {
    await client.query('BEGIN');
    const r = await client.query(
      'SELECT number_id, chunk_count, materialized_chunks FROM bulk_work.jobs WHERE bulk_id = $1 FOR UPDATE',
      [bulkId],
    );
    const job = r.rows[0];
    if (!job) {
      await client.query('ROLLBACK');
      return 0;
    }
    const upTo = Math.min(job.chunk_count, job.materialized_chunks + maxChunks);
    for (let chunk = job.materialized_chunks; chunk < upTo; chunk++) {
      const events = await services.store.readStream(chunkStreamId(bulkId, chunk));
      const added = events.find((e) => e.type === 'BulkRecipientsAdded');
      if (!added) throw new Error(`bulk ${bulkId}: chunk ${chunk} has no BulkRecipientsAdded event`);
      const d = added.data as BulkEventData<'BulkRecipientsAdded'>;
      await client.query(
        `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables)
         SELECT $1, r.idx, $2, $3, r.phone, r.e164, r.variables, r.button_variables
           FROM unnest($4::int[], $5::text[], $6::text[], $7::jsonb[], $8::jsonb[]) AS r(idx, phone, e164, variables, button_variables)
         ON CONFLICT (bulk_id, idx) DO NOTHING`,
        [
          bulkId, chunk, job.number_id,
          d.recipients.map((x) => x.index),
          d.recipients.map((x) => x.phone),
          d.recipients.map((x) => normalizePhone(x.phone) ?? x.phone),
          d.recipients.map((x) => JSON.stringify(x.variables)),
          d.recipients.map((x) => JSON.stringify(x.buttonVariables)),
        ],
      );
    }
    await client.query('UPDATE bulk_work.jobs SET materialized_chunks = $2 WHERE bulk_id = $1', [bulkId, upTo]);
    await client.query('COMMIT');
    return upTo;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

// ---------------------------------------------------------------- claims (pending → in_flight)

export interface ClaimedRecipient {
  idx: number;
  chunk: number;
  phone: string;
  e164: string;
  variables: Record<string, unknown>;
  buttonVariables: Record<string, unknown>;
  /** including this attempt */
  attempts: number;
}

const toClaimed = (r: any): ClaimedRecipient => ({
  idx: r.idx, chunk: r.chunk, phone: r.phone, e164: r.e164, variables: r.variables, buttonVariables: r.button_variables, attempts: r.attempts,
});

export interface ClaimArgs {
  bulkId: string;
  dispatcher: string;
  now: Date;
  leaseUntil: Date;
  limit: number;
  /**
   * Look at indexes from here on (the dispatcher's cursor): the rows before it were claimed already, and their
   * dead index entries would otherwise be walked again on every claim. Retries behind the cursor are found by
   * a claim from 0 when the cursor runs dry.
   */
  fromIdx?: number;
}

const PENDING_READY = `state = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= $now)`;
const JOB_ACTIVE = `EXISTS (SELECT 1 FROM bulk_work.jobs j WHERE j.bulk_id = $bulk AND NOT j.cancel_requested AND j.state IN ('queued', 'processing'))`;

const sql = (text: string, names: Record<string, number>) => text.replace(/\$(bulk|now|number|since)\b/g, (_, n: string) => `$${names[n]}`);

async function markInFlight(db: Pool | PoolClient, args: ClaimArgs, idxs: number[]): Promise<ClaimedRecipient[]> {
  if (idxs.length === 0) return [];
  const r = await db.query(
    `UPDATE bulk_work.recipients SET state = 'in_flight', dispatcher = $2, lease_until = $3, claimed_at = $4, attempts = attempts + 1
      WHERE bulk_id = $1 AND idx = ANY($5::int[]) AND state = 'pending'
      RETURNING idx, chunk, phone, e164, variables, button_variables, attempts`,
    [args.bulkId, args.dispatcher, args.leaseUntil, args.now, idxs],
  );
  return r.rows.map(toClaimed).sort((a, b) => a.idx - b.idx);
}

/**
 * Claims up to `limit` ready recipients of a job (no quota: TIER_UNLIMITED): one statement, rows locked with
 * FOR UPDATE SKIP LOCKED, so concurrent dispatchers get disjoint rows; committed before any send.
 */
export async function claimRecipients(pool: Pool, args: ClaimArgs): Promise<ClaimedRecipient[]> {
  const names = { bulk: 1, now: 4 };
  const r = await pool.query(
    sql(
      `WITH c AS (
         SELECT idx FROM bulk_work.recipients
          WHERE bulk_id = $bulk AND idx >= $6 AND ${PENDING_READY} AND ${JOB_ACTIVE}
          ORDER BY idx LIMIT $5 FOR UPDATE SKIP LOCKED)
       UPDATE bulk_work.recipients r SET state = 'in_flight', dispatcher = $2, lease_until = $3, claimed_at = $now, attempts = r.attempts + 1
        WHERE r.bulk_id = $bulk AND r.idx = ANY(ARRAY(SELECT idx FROM c)) AND r.state = 'pending'
       RETURNING r.idx, r.chunk, r.phone, r.e164, r.variables, r.button_variables, r.attempts`,
      names,
    ),
    [args.bulkId, args.dispatcher, args.leaseUntil, args.now, args.limit, args.fromIdx ?? 0],
  );
  return r.rows.map(toClaimed).sort((a, b) => a.idx - b.idx);
}

export interface QuotaClaim {
  claimed: ClaimedRecipient[];
  /** unique recipients of the number in the rolling window (sent, or in flight), before this claim */
  used: number;
  limit: number;
  /** nothing could be claimed because the quota is used up (ready recipients are waiting) */
  blocked: boolean;
  /** when blocked: when the window frees room next */
  resumeAt: Date | null;
}

const WINDOW_UNION = `
  SELECT recipient AS r, last_sent_at AS t FROM rm_accounts.quota_recipients WHERE number_id = $number AND last_sent_at > $since
  UNION ALL
  SELECT e164, claimed_at FROM bulk_work.recipients WHERE number_id = $number AND state IN ('in_flight', 'sent') AND claimed_at > $since`;

const IN_WINDOW = `(
  EXISTS (SELECT 1 FROM rm_accounts.quota_recipients q WHERE q.number_id = $number AND q.recipient = r.e164 AND q.last_sent_at > $since)
  OR EXISTS (SELECT 1 FROM bulk_work.recipients w WHERE w.number_id = $number AND w.e164 = r.e164
                AND w.state IN ('in_flight', 'sent') AND w.claimed_at > $since))`;

/**
 * Claims for a number with a daily limit: serialised per number (advisory lock), counts the unique
 * recipients of the rolling 24 h window (single sends from the accounts read model, plus this work table's
 * sent and in-flight rows, which the read model may not have yet), and claims recipients already in the
 * window freely and new ones only while room remains.
 */
export async function claimRecipientsWithQuota(pool: Pool, args: ClaimArgs & { numberId: number; dailyLimit: number }): Promise<QuotaClaim> {
  const since = new Date(args.now.getTime() - QUOTA_WINDOW_MS);
  const names = { bulk: 1, now: 2, number: 3, since: 4 };
  const base = [args.bulkId, args.now, args.numberId, since];
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`bulk-quota:${args.numberId}`]);
    const windowNames = { number: 1, since: 2 };
    const usedRow = await client.query<{ n: number }>(
      sql(`SELECT count(DISTINCT u.r)::int AS n FROM (${WINDOW_UNION}) u`, windowNames),
      [args.numberId, since],
    );
    const used = usedRow.rows[0].n;
    const remaining = args.dailyLimit - used;
    const candidates = await client.query<{ idx: number; in_window: boolean }>(
      sql(
        `SELECT r.idx, ${IN_WINDOW} AS in_window FROM bulk_work.recipients r
          WHERE r.bulk_id = $bulk AND r.idx >= $6 AND ${PENDING_READY} AND ${JOB_ACTIVE}
          ORDER BY r.idx LIMIT $5 FOR UPDATE OF r SKIP LOCKED`,
        names,
      ),
      [...base, args.limit, args.fromIdx ?? 0],
    );
    let room = Math.max(0, remaining);
    let chosen: number[] = [];
    for (const c of candidates.rows) {
      if (c.in_window) chosen.push(c.idx);
      else if (room > 0) {
        chosen.push(c.idx);
        room--;
      }
    }
    if (chosen.length === 0 && candidates.rows.length > 0) {
      // no room: recipients already in the window can still be sent to, wherever they are in the list
      const free = await client.query<{ idx: number }>(
        sql(
          `SELECT r.idx FROM bulk_work.recipients r
            WHERE r.bulk_id = $bulk AND ${PENDING_READY} AND ${JOB_ACTIVE} AND ${IN_WINDOW}
            ORDER BY r.idx LIMIT $5 FOR UPDATE OF r SKIP LOCKED`,
          names,
        ),
        [...base, args.limit],
      );
      chosen = free.rows.map((x) => x.idx);
    }
    const claimed = await markInFlight(client, args, chosen);
    let resumeAt: Date | null = null;
    const blocked = claimed.length === 0 && candidates.rows.length > 0;
    if (blocked) {
      const oldest = await client.query<{ t: Date | null }>(
        sql(`SELECT min(u.t) AS t FROM (${WINDOW_UNION}) u`, windowNames),
        [args.numberId, since],
      );
      const t = oldest.rows[0].t;
      resumeAt = t ? new Date(t.getTime() + QUOTA_WINDOW_MS + 1) : new Date(args.now.getTime() + 1000);
    }
    await client.query('COMMIT');
    return { claimed, used, limit: args.dailyLimit, blocked, resumeAt };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

// ---------------------------------------------------------------- outcomes (in_flight → sent | failed | pending)

export type Outcome =
  | { idx: number; kind: 'sent'; providerMessageId: string; at: Date }
  | { idx: number; kind: 'failed'; code: string; message: string; at: Date }
  /** a retryable error: back to pending until `nextAttemptAt` */
  | { idx: number; kind: 'retry'; code: string; message: string; nextAttemptAt: Date }
  /** claimed but never sent (stopping, cancelled): back to pending, the attempt does not count */
  | { idx: number; kind: 'unsent' };

interface OutcomeRow {
  idx: number;
  phone: string;
  e164: string;
  attempts: number;
  state: 'sent' | 'failed';
  providerMessageId: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  interrupted: boolean;
  outcomeAt: Date;
}

/** Outcomes of one chunk and kind written together: appended as one event, then deleted. */
export interface OutcomeBatch {
  id: string;
  bulkId: string;
  companyId: number;
  numberId: number;
  chunk: number;
  kind: 'sent' | 'failed';
  rows: OutcomeRow[];
}

const toOutcomeRow = (r: any): OutcomeRow => ({
  idx: r.idx,
  phone: r.phone,
  e164: r.e164,
  attempts: r.attempts,
  state: r.state,
  providerMessageId: r.provider_message_id,
  errorCode: r.error_code,
  errorMessage: r.error_message,
  interrupted: r.interrupted,
  outcomeAt: r.outcome_at instanceof Date ? r.outcome_at : new Date(r.outcome_at),
});

/** The event id of an outcome batch: a re-append of the same batch is recognised by the event store. */
export const batchEventId = (bulkId: string, batchId: string): string => deterministicUuid('bulk-outcome-batch', `${bulkId}:${batchId}`);

function groupBatches(rows: any[], job: { bulkId: string; companyId: number; numberId: number }): OutcomeBatch[] {
  const batches = new Map<string, OutcomeBatch>();
  for (const r of rows) {
    const id = String(r.batch_id);
    let b = batches.get(id);
    if (!b) batches.set(id, (b = { id, bulkId: job.bulkId, companyId: job.companyId, numberId: job.numberId, chunk: r.chunk, kind: r.state, rows: [] }));
    b.rows.push(toOutcomeRow(r));
  }
  for (const b of batches.values()) b.rows.sort((x, y) => x.idx - y.idx);
  return [...batches.values()];
}

/**
 * Writes a window's outcomes, only for rows still in flight for this dispatcher (a row the lease sweep already
 * resolved as interrupted keeps that outcome), and in the same statement the outcome batches of the sent and
 * failed ones (per chunk and kind). Retries and unsent rows go back to pending.
 */
export async function writeOutcomes(
  pool: Pool,
  job: { bulkId: string; companyId: number; numberId: number },
  dispatcher: string,
  outcomes: readonly Outcome[],
  now: Date,
): Promise<OutcomeBatch[]> {
  if (outcomes.length === 0) return [];
  const idx: number[] = [];
  const state: string[] = [];
  const pmid: (string | null)[] = [];
  const code: (string | null)[] = [];
  const msg: (string | null)[] = [];
  const at: (Date | null)[] = [];
  const next: (Date | null)[] = [];
  const delta: number[] = [];
  const push = (i: number, st: string, p: string | null, c: string | null, m: string | null, a: Date | null, n: Date | null, d: number) => {
    idx.push(i); state.push(st); pmid.push(p); code.push(c); msg.push(m); at.push(a); next.push(n); delta.push(d);
  };
  for (const o of outcomes) {
    switch (o.kind) {
      case 'sent': push(o.idx, 'sent', o.providerMessageId, null, null, o.at, null, 0); break;
      case 'failed': push(o.idx, 'failed', null, o.code, o.message, o.at, null, 0); break;
      case 'retry': push(o.idx, 'pending', null, o.code, o.message, null, o.nextAttemptAt, 0); break;
      case 'unsent': push(o.idx, 'pending', null, null, null, null, null, -1); break;
    }
  }
  // per-row values by position in parallel arrays: rows are found by index lookups whatever the statistics say
  const pos = (array: string) => `(${array})[array_position($2::int[], r.idx)]`;
  const r = await pool.query(
    `WITH u AS (
       UPDATE bulk_work.recipients r
          SET state = ${pos('$3::text[]')}, provider_message_id = ${pos('$4::text[]')}, error_code = ${pos('$5::text[]')},
              error_message = ${pos('$6::text[]')}, outcome_at = ${pos('$7::timestamptz[]')}, next_attempt_at = ${pos('$8::timestamptz[]')},
              attempts = r.attempts + ${pos('$9::int[]')},
              dispatcher = CASE WHEN ${pos('$3::text[]')} = 'pending' THEN NULL ELSE r.dispatcher END, lease_until = NULL
        WHERE r.bulk_id = $1 AND r.idx = ANY($2::int[]) AND r.state = 'in_flight' AND r.dispatcher = $10
       RETURNING r.idx, r.chunk, r.phone, r.e164, r.attempts, r.state, r.provider_message_id, r.error_code, r.error_message,
                 r.interrupted, r.outcome_at),
     b AS (
       INSERT INTO bulk_work.outcome_batches (bulk_id, chunk, kind, idxs, created_at)
       SELECT $1, chunk, state, array_agg(idx ORDER BY idx), $11 FROM u WHERE state IN ('sent', 'failed') GROUP BY chunk, state
       RETURNING id, chunk, kind)
     SELECT u.*, b.id AS batch_id FROM u JOIN b ON b.chunk = u.chunk AND b.kind = u.state`,
    [job.bulkId, idx, state, pmid, code, msg, at, next, delta, dispatcher, now],
  );
  return groupBatches(r.rows, job);
}

function batchEvent(b: OutcomeBatch): EventToAppend {
  const at = b.rows.reduce((t, r) => (r.outcomeAt.getTime() > t.getTime() ? r.outcomeAt : t), b.rows[0].outcomeAt).toISOString();
  const metadata = {
    eventId: batchEventId(b.bulkId, b.id), correlationId: b.bulkId, causationId: null, companyId: b.companyId, actor: 'bulk-dispatcher', at,
  };
  if (b.kind === 'sent') {
    const data: BulkEventData<'BulkRecipientsDispatched'> = {
      bulkId: b.bulkId, companyId: b.companyId, numberId: b.numberId, chunk: b.chunk,
      recipients: b.rows.map((r) => ({
        index: r.idx, recipientPhone: r.phone, recipientE164: r.e164, providerMessageId: r.providerMessageId ?? '',
        attempts: Math.max(1, r.attempts), at: r.outcomeAt.toISOString(),
      })),
    };
    return { type: 'BulkRecipientsDispatched', data, metadata };
  }
  const data: BulkEventData<'BulkRecipientsRejected'> = {
    bulkId: b.bulkId, companyId: b.companyId, chunk: b.chunk,
    recipients: b.rows.map((r) => ({
      index: r.idx, recipientPhone: r.phone, code: r.errorCode ?? 'unknown', message: r.errorMessage ?? 'the send failed',
      interrupted: r.interrupted, attempts: Math.max(0, r.attempts), at: r.outcomeAt.toISOString(),
    })),
  };
  return { type: 'BulkRecipientsRejected', data, metadata };
}

/** Appends each batch as one event on its chunk stream (expected revision `any`), then deletes the batches. */
export async function appendBatches(services: Services, batches: readonly OutcomeBatch[]): Promise<void> {
  if (batches.length === 0) return;
  await Promise.all(batches.map((b) => services.store.append(chunkStreamId(b.bulkId, b.chunk), [batchEvent(b)], 'any')));
  await services.pool.query('DELETE FROM bulk_work.outcome_batches WHERE id = ANY($1::bigint[])', [batches.map((b) => b.id)]);
}

/**
 * Appends the batches left behind (a crash between writing outcomes and appending them): all of them, one
 * job's, some by id, or those created before a time. Re-appending a batch already stored is a no-op.
 */
export async function flushBatches(services: Services, filter: { bulkId?: string; olderThan?: Date; ids?: string[] } = {}): Promise<number> {
  const params: unknown[] = [];
  const where: string[] = [];
  if (filter.bulkId) {
    params.push(filter.bulkId);
    where.push(`b.bulk_id = $${params.length}`);
  }
  if (filter.olderThan) {
    params.push(filter.olderThan);
    where.push(`b.created_at <= $${params.length}`);
  }
  if (filter.ids) {
    if (filter.ids.length === 0) return 0;
    params.push(filter.ids);
    where.push(`b.id = ANY($${params.length}::bigint[])`);
  }
  const list = await services.pool.query(
    `SELECT b.id, b.bulk_id, b.chunk, b.kind, b.idxs, j.company_id, j.number_id
       FROM bulk_work.outcome_batches b JOIN bulk_work.jobs j ON j.bulk_id = b.bulk_id
      ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY b.id LIMIT 500`,
    params,
  );
  let flushed = 0;
  for (const b of list.rows) {
    const rows = await services.pool.query(
      `SELECT idx, chunk, phone, e164, attempts, state, provider_message_id, error_code, error_message, interrupted, outcome_at,
              $2::bigint AS batch_id
         FROM bulk_work.recipients WHERE bulk_id = $1 AND idx = ANY($3::int[]) AND state = $4`,
      [b.bulk_id, b.id, b.idxs, b.kind],
    );
    const [batch] = groupBatches(rows.rows, { bulkId: b.bulk_id, companyId: b.company_id, numberId: b.number_id });
    if (batch) await appendBatches(services, [batch]);
    else await services.pool.query('DELETE FROM bulk_work.outcome_batches WHERE id = $1', [b.id]);
    flushed += batch?.rows.length ?? 0;
  }
  return list.rows.length === 500 ? flushed + (await flushBatches(services, filter)) : flushed;
}

/**
 * Recipients whose in-flight lease ran out (their dispatcher died between marking them and recording the
 * provider's answer) are resolved as failed, "interrupted, outcome unknown": never sent again. Returns the
 * outcome batches written (append them with flushBatches).
 */
export async function resolveExpiredInFlight(pool: Pool, now: Date): Promise<{ count: number; batchIds: string[] }> {
  const r = await pool.query<{ id: string; n: number }>(
    `WITH u AS (
       UPDATE bulk_work.recipients
          SET state = 'failed', interrupted = true, error_code = $2, error_message = $3, outcome_at = $1, lease_until = NULL
        WHERE state = 'in_flight' AND lease_until < $1
       RETURNING bulk_id, chunk, idx)
     INSERT INTO bulk_work.outcome_batches (bulk_id, chunk, kind, idxs, created_at)
     SELECT bulk_id, chunk, 'failed', array_agg(idx ORDER BY idx), $1 FROM u GROUP BY bulk_id, chunk
     RETURNING id, cardinality(idxs) AS n`,
    [now, INTERRUPTED_CODE, INTERRUPTED_MESSAGE],
  );
  return { count: r.rows.reduce((n, x) => n + x.n, 0), batchIds: r.rows.map((x) => String(x.id)) };
}

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
