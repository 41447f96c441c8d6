// Outcomes in the work table (in_flight → sent | failed | pending) written with their outcome batches, the
// batches appended as one event each and deleted (or flushed later), and the lease sweep's interrupted outcomes.
import type { Pool } from 'pg';
import type { EventToAppend } from '../../ports/event-store';
import { type BulkEventData, isOutcomeUnknownCode } from '../../events/bulk';
import type { Services } from '../../services';
import { deterministicUuid } from '../send/ids';
import { chunkStreamId } from './decider';
import { bulkReservationId } from './work-claims';
import { OUTCOME_UNKNOWN_CODES } from './work-unknown-outcomes';

export const INTERRUPTED_CODE = 'interrupted' satisfies (typeof OUTCOME_UNKNOWN_CODES)[number];
export const INTERRUPTED_MESSAGE = 'interrupted, outcome unknown';

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

/** Outcomes whose recipient was surely not sent: its quota reservation, if the claim made one, is given back. */
const givesRoomBack = (o: Outcome): boolean => o.kind === 'retry' || o.kind === 'unsent' || (o.kind === 'failed' && !isOutcomeUnknownCode(o.code));

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
 * failed ones (per chunk and kind). Retries and unsent rows go back to pending. The quota reservations of
 * recipients surely not sent are deleted in the same statement (a recipient the provider may have keeps its own
 * until it expires).
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
       RETURNING id, chunk, kind),
     given_back AS (DELETE FROM public.send_quota_reservations WHERE reservation_id = ANY($12::uuid[]))
     SELECT u.*, b.id AS batch_id FROM u JOIN b ON b.chunk = u.chunk AND b.kind = u.state`,
    [job.bulkId, idx, state, pmid, code, msg, at, next, delta, dispatcher, now, outcomes.filter(givesRoomBack).map((o) => bulkReservationId(job.bulkId, o.idx))],
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
  // numberId and recipientE164: the accounts read model counts the outcome-unknown ones in the quota window
  const data: BulkEventData<'BulkRecipientsRejected'> = {
    bulkId: b.bulkId, companyId: b.companyId, numberId: b.numberId, chunk: b.chunk,
    recipients: b.rows.map((r) => ({
      index: r.idx, recipientPhone: r.phone, recipientE164: r.e164, code: r.errorCode ?? 'unknown', message: r.errorMessage ?? 'the send failed',
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
 * provider's answer) are resolved as failed, "interrupted, outcome unknown": never sent again. A lease has run out
 * when both `now` and Postgres's clock have passed it (a sweep whose clock runs ahead does not interrupt a live
 * dispatcher's recipients). Returns the outcome batches written (append them with flushBatches).
 */
export async function resolveExpiredInFlight(pool: Pool, now: Date): Promise<{ count: number; batchIds: string[] }> {
  const r = await pool.query<{ id: string; n: number }>(
    `WITH u AS (
       UPDATE bulk_work.recipients
          SET state = 'failed', interrupted = true, error_code = $2, error_message = $3, outcome_at = $1, lease_until = NULL
        WHERE state = 'in_flight' AND lease_until < $1 AND lease_until < now()
       RETURNING bulk_id, chunk, idx)
     INSERT INTO bulk_work.outcome_batches (bulk_id, chunk, kind, idxs, created_at)
     SELECT bulk_id, chunk, 'failed', array_agg(idx ORDER BY idx), $1 FROM u GROUP BY bulk_id, chunk
     RETURNING id, cardinality(idxs) AS n`,
    [now, INTERRUPTED_CODE, INTERRUPTED_MESSAGE],
  );
  return { count: r.rows.reduce((n, x) => n + x.n, 0), batchIds: r.rows.map((x) => String(x.id)) };
}
