import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { withTransaction } from '../../shared/tx';
import { aheadByEitherClock, passedByBothClocks } from '../../shared/both-clocks';

// The webhook outbox (migration 0007, schema `webhooks`): one delivery per (webhook event, endpoint) and every
// attempt. Written by the fan-out and the sender (src/workers/webhook-*.ts); read and re-queued by the API.
// An endpoint's deliveries set aside, resumed, dropped or given back, and those whose attempts are recorded, are
// locked in delivery_id order (ORDER BY ... FOR UPDATE), so two such statements never deadlock (a PATCH beside a
// sender's give-back answered 500; a PATCH beside the record of a round of attempts, found 2026-11-27).
// A claim stores its lease in claimed_until too (migration 0015), until its attempt is recorded or the delivery given
// back: a delivery due at that lease, or set aside since (its endpoint disabled), is in a sender's hands.

type Db = Pool | PoolClient;

export interface NewDelivery {
  endpointId: string;
  companyId: number;
  webhookId: string;
  eventType: string;
  payload: string;
}

/**
 * Queues deliveries due now; a (endpoint, webhook id) queued before is left alone (at least once, not twice).
 * `claimed`: the first `count` of them are queued already claimed by a sender until `until` (the hand-off,
 * src/workers/webhook-handoff.ts). Returns the ids of the deliveries queued (in input order), and those of them
 * queued claimed, for that sender to post.
 */
export async function queueDeliveries(
  db: Db,
  deliveries: readonly NewDelivery[],
  now: Date,
  claimed: { count: number; until: Date } = { count: 0, until: now },
): Promise<{ queued: string[]; claimed: ClaimedDelivery[] }> {
  if (deliveries.length === 0) return { queued: [], claimed: [] };
  const ids = deliveries.map(() => randomUUID());
  const r = await db.query<{ delivery_id: string }>({
    name: 'webhooks_queue_deliveries',
    text: QUEUE_DELIVERIES_SQL,
    values: [ids, deliveries.map((d) => d.endpointId), deliveries.map((d) => d.companyId), deliveries.map((d) => d.webhookId),
      // the payloads as one JSON array: node-postgres escapes a text[] element in JavaScript, character by character
      deliveries.map((d) => d.eventType), JSON.stringify(deliveries.map((d) => d.payload)), now, deliveries.map((_, i) => (i < claimed.count ? claimed.until : now))],
  });
  const queued = new Set(r.rows.map((row) => row.delivery_id));
  return {
    queued: ids.filter((id) => queued.has(id)),
    claimed: deliveries.flatMap((d, i) => (i < claimed.count && queued.has(ids[i])
      ? [{ delivery_id: ids[i], endpoint_id: d.endpointId, webhook_id: d.webhookId, payload: d.payload, attempts: 0 }]
      : [])),
  };
}

const QUEUE_DELIVERIES_SQL = `INSERT INTO webhooks.deliveries (delivery_id, endpoint_id, company_id, webhook_id, event_type, payload, status, next_attempt_at, claimed_until, created_at)
  SELECT d, e, c, w, t, p, 'pending', n, NULLIF(n, $7), $7
    FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[],
                ARRAY(SELECT v FROM json_array_elements_text($6::json) WITH ORDINALITY AS a(v, i) ORDER BY i), $8::timestamptz[]) AS x(d, e, c, w, t, p, n)
  ON CONFLICT (endpoint_id, webhook_id) DO NOTHING
  RETURNING delivery_id`;

export interface ClaimedDelivery {
  delivery_id: string;
  endpoint_id: string;
  webhook_id: string;
  payload: string;
  attempts: number;
}

/**
 * The rows a claim takes, locked: the oldest due deliveries of enabled endpoints but those in $4, at most $2. A claimed
 * one (claimed_until set) is taken over only once its lease has ended by the claimer's clock and by Postgres's (a
 * lease is written with another sender's clock: docs/reliability.md, "Clocks of several processes"); one never
 * claimed, or recorded or given back since, is due by the claimer's clock alone. A row-level filter of rows the scan
 * reads anyway: the plan and its blocks are unchanged.
 */
const DUE_FOR_CLAIM = `FROM webhooks.deliveries c
          WHERE c.status = 'pending' AND c.next_attempt_at <= $1 AND c.endpoint_id <> ALL($4::text[])
            AND (c.claimed_until IS NULL OR ${passedByBothClocks('c.claimed_until', '$1')})
            AND (SELECT e.enabled FROM rm_webhooks.endpoints e WHERE e.endpoint_id = c.endpoint_id)
          ORDER BY c.next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED`;
/** A claim's lease ($3), stored twice (see IN_FLIGHT); a retry asked before is the post this claim makes. */
const CLAIM_SET = 'next_attempt_at = $3, claimed_until = $3, retry_asked = false';
const CLAIMED = `WHERE d.delivery_id = claimed.delivery_id
 RETURNING d.delivery_id, d.endpoint_id, d.webhook_id, d.payload, d.attempts`;

/**
 * The due claim: the oldest due deliveries of enabled endpoints but those in $4 (the sender's full ones), moved a
 * lease ahead (SKIP LOCKED: senders share them).
 */
export const CLAIM_DUE_DELIVERIES_SQL = `UPDATE webhooks.deliveries d SET ${CLAIM_SET}
   FROM (SELECT c.delivery_id ${DUE_FOR_CLAIM}) claimed
  ${CLAIMED}`;

/**
 * The claim with caps ($5 endpoints, $6 how many each may get): the same rows read and locked, of which each capped
 * endpoint gets its earliest due up to its cap; the rest stay due (their locks end with the claim's transaction).
 */
const CLAIM_DUE_DELIVERIES_CAPPED_SQL = `UPDATE webhooks.deliveries d SET ${CLAIM_SET}
   FROM (SELECT r.delivery_id
           FROM (SELECT l.delivery_id, l.endpoint_id, row_number() OVER (PARTITION BY l.endpoint_id ORDER BY l.next_attempt_at) AS n
                   FROM (SELECT c.delivery_id, c.endpoint_id, c.next_attempt_at ${DUE_FOR_CLAIM}) l) r
           LEFT JOIN unnest($5::text[], $6::int[]) AS cap(endpoint_id, room) ON cap.endpoint_id = r.endpoint_id
          WHERE cap.room IS NULL OR r.n <= cap.room) claimed
  ${CLAIMED}`;

/** Run before CLAIM_DUE_DELIVERIES_SQL in its transaction (see claimDueDeliveries). */
export const CLAIM_DUE_PLAN_SETTING = 'SET LOCAL enable_bitmapscan = off';

/**
 * Claims up to `limit` due deliveries until `leaseUntil`, none of the endpoints `passOver`, and no more than its cap
 * for each endpoint in `caps` (the sender's narrowed endpoints), in a short transaction of its own (none stays open
 * across the HTTP calls: it would hold back every reader of the event log).
 * The plan must be the due index read in order, stopping at the limit: delivered rows leave dead entries in that
 * index until vacuum (thousands a second under load), and a plain index scan marks them dead as it passes, so the
 * next claim skips them, where a bitmap scan (the planner's usual choice here) would visit every one on every claim.
 * The endpoint check is a per-row subquery, not a join, for the same reason: a join lets the planner read every due
 * delivery before sorting (a backlog of a slow endpoint on every claim).
 */
export async function claimDueDeliveries(
  pool: Pool,
  now: Date,
  limit: number,
  leaseUntil: Date,
  passOver: readonly string[] = [],
  caps: { endpointIds: readonly string[]; rooms: readonly number[] } = { endpointIds: [], rooms: [] },
): Promise<ClaimedDelivery[]> {
  return withTransaction(pool, async (tx) => {
    await tx.query(CLAIM_DUE_PLAN_SETTING);
    const capped = caps.endpointIds.length > 0;
    return (await tx.query<ClaimedDelivery>(
      capped ? CLAIM_DUE_DELIVERIES_CAPPED_SQL : CLAIM_DUE_DELIVERIES_SQL,
      capped ? [now, limit, leaseUntil, passOver, caps.endpointIds, caps.rooms] : [now, limit, leaseUntil, passOver],
    )).rows;
  });
}

/** The backlog gauges count due deliveries up to this many (docs/webhooks.md, "Operating"). */
export const BACKLOG_COUNT_CAP = 10_000;

/**
 * The deliveries a sender could claim now (due, of enabled endpoints), counted up to BACKLOG_COUNT_CAP, and how long
 * the oldest has been due: read along the due index in order, as the claim reads it.
 */
export async function deliveryBacklog(db: Db, now: Date): Promise<{ due: number; oldestDueSeconds: number }> {
  const r = await db.query<{ due: number; oldest_due_seconds: number }>({
    name: 'webhooks_delivery_backlog',
    text: `SELECT count(*)::int AS due, COALESCE(EXTRACT(EPOCH FROM ($1::timestamptz - min(next_attempt_at))), 0)::float8 AS oldest_due_seconds
             FROM (SELECT c.next_attempt_at FROM webhooks.deliveries c
                    WHERE c.status = 'pending' AND c.next_attempt_at <= $1
                      AND (SELECT e.enabled FROM rm_webhooks.endpoints e WHERE e.endpoint_id = c.endpoint_id)
                    ORDER BY c.next_attempt_at LIMIT $2) due`,
    values: [now, BACKLOG_COUNT_CAP],
  });
  return { due: r.rows[0].due, oldestDueSeconds: r.rows[0].oldest_due_seconds };
}

export interface AttemptRecord {
  deliveryId: string;
  endpointId: string;
  /** pending (a retry at nextAt), succeeded or failed */
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  attemptedAt: Date;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  nextAt: Date | null;
  /**
   * A failed attempt's claim (its lease, as stored in claimed_until): it decides the delivery only while that claim
   * is still the delivery's. Omitted or null: recorded whatever the claim (a success, or a caller without one).
   */
  leaseUntil?: Date | null;
}

/**
 * Records a round of attempts in one statement: the attempt log, each delivery's new state (a delivery dropped
 * meanwhile, its endpoint deleted, stays dropped; one set aside meanwhile, its endpoint disabled, stays set aside if
 * pending; one whose retry was asked while the attempt was in flight is due at `at` unless the attempt succeeded, see
 * requeueDelivery), and the failure streaks: `recovered` endpoints (a success after failures) are cleared, `failing`
 * ones start a streak at `at` unless one runs. Returns the failing endpoints whose streak began at or before
 * `staleBefore` (`stale`), and how many deliveries the round marked failed (`failed`: not those a retry asked
 * meanwhile made pending again, nor those dropped meanwhile).
 * A failure sent under a claim replaced since (`leaseUntil` no longer the delivery's claimed_until: the sender paused
 * past its lease, and another sender claimed the delivery, review 16b) is logged but leaves the delivery to that
 * claim (`taken`; docs/webhooks.md, "Delivery", "A failed answer after another sender's claim").
 */
export async function recordAttempts(
  db: Db,
  rows: readonly AttemptRecord[],
  streaks: { recovered: readonly string[]; failing: readonly string[] },
  at: Date,
  staleBefore: Date,
): Promise<{ stale: string[]; failed: number; taken: string[] }> {
  const r = await db.query<{ endpoint_id: string | null; stale: boolean | null; failed: number | null; taken: string | null }>({
    name: 'webhooks_record_attempts',
    text: RECORD_ATTEMPTS_SQL,
    // the attempts as one JSON array: node-postgres escapes every element of an array parameter in JavaScript
    values: [JSON.stringify(rows.map((x) => ({
      delivery_id: x.deliveryId, endpoint_id: x.endpointId, attempted_at: x.attemptedAt, status_code: x.statusCode, latency_ms: x.latencyMs,
      error: x.error, next_at: x.nextAt, status: x.status, attempts: x.attempts, lease_until: x.status === 'succeeded' ? null : x.leaseUntil ?? null,
    }))), at, streaks.recovered, streaks.failing, staleBefore],
  });
  return {
    stale: r.rows.filter((x) => x.stale).map((x) => x.endpoint_id!),
    failed: r.rows.find((x) => x.failed !== null)?.failed ?? 0,
    taken: r.rows.filter((x) => x.taken !== null).map((x) => x.taken!),
  };
}

/**
 * A retry asked while the attempt was in flight (requeueDelivery), made now: due at once, with a fresh schedule when
 * the attempt ended it (failed), as a retry of a failed delivery; an attempt that succeeded answered it.
 */
const RETRIED = `(d.retry_asked AND x.status <> 'succeeded')`;

/**
 * A failure whose claim was replaced since (see recordAttempts): another sender claimed the delivery, or claimed and
 * recorded it (claimed_until cleared; succeeded, perhaps). Judged on the row as locked (FOR UPDATE returns its latest
 * version), so no claim can come between the judgement and the write. Logged with the delivery due again at that
 * lease's end (when another sender could take it), the delivery left alone.
 */
const TAKEN = `(x.lease_until IS NOT NULL AND x.status <> 'succeeded' AND k.delivery_id IS NOT NULL AND k.claimed_until IS DISTINCT FROM x.lease_until)`;

const RECORD_ATTEMPTS_SQL = `WITH x AS (
    SELECT * FROM ROWS FROM (json_to_recordset($1::json) AS (delivery_id uuid, endpoint_id text, attempted_at timestamptz,
      status_code int, latency_ms int, error text, next_at timestamptz, status text, attempts int, lease_until timestamptz)) WITH ORDINALITY
      AS x(delivery_id, endpoint_id, attempted_at, status_code, latency_ms, error, next_at, status, attempts, lease_until, ord)
  ), locked AS (
    SELECT delivery_id, claimed_until FROM webhooks.deliveries WHERE delivery_id IN (SELECT delivery_id FROM x) ORDER BY delivery_id FOR UPDATE
  ), judged AS (
    SELECT x.*, ${TAKEN} AS taken FROM x LEFT JOIN locked k ON k.delivery_id = x.delivery_id
  ), logged AS (
    INSERT INTO webhooks.attempts (delivery_id, endpoint_id, attempted_at, status_code, latency_ms, error, next_retry_at)
    SELECT delivery_id, endpoint_id, attempted_at, status_code, latency_ms, error, CASE WHEN taken THEN lease_until ELSE next_at END FROM judged ORDER BY ord
  ), delivered AS (
    UPDATE webhooks.deliveries d SET status = CASE WHEN ${RETRIED} THEN 'pending' ELSE x.status END,
           attempts = CASE WHEN ${RETRIED} AND x.status = 'failed' THEN 0 ELSE x.attempts END,
           next_attempt_at = CASE WHEN d.next_attempt_at IS NULL THEN NULL WHEN ${RETRIED} THEN $2::timestamptz ELSE x.next_at END,
           completed_at = CASE WHEN x.status = 'pending' OR ${RETRIED} THEN NULL ELSE $2::timestamptz END, retry_asked = false, claimed_until = NULL
      FROM judged x, locked k
     WHERE d.delivery_id = x.delivery_id AND k.delivery_id = d.delivery_id AND d.status = 'pending' AND NOT x.taken
    RETURNING d.status
  ), recovered AS (
    INSERT INTO webhooks.endpoint_health (endpoint_id, failing_since) SELECT id, NULL FROM unnest($3::text[]) id
    ON CONFLICT (endpoint_id) DO UPDATE SET failing_since = NULL WHERE webhooks.endpoint_health.failing_since IS NOT NULL
  ), streaks AS (
    INSERT INTO webhooks.endpoint_health (endpoint_id, failing_since) SELECT id, $2::timestamptz FROM unnest($4::text[]) id
    ON CONFLICT (endpoint_id) DO UPDATE SET failing_since = COALESCE(webhooks.endpoint_health.failing_since, EXCLUDED.failing_since)
    RETURNING endpoint_id, failing_since <= $5::timestamptz AS stale
  )
  SELECT endpoint_id, stale, NULL::int AS failed, NULL::uuid AS taken FROM streaks
  UNION ALL SELECT NULL, NULL, count(*)::int, NULL FROM delivered WHERE status = 'failed'
  UNION ALL SELECT NULL, NULL, NULL, delivery_id FROM judged WHERE taken`;

/** A claimed delivery and the end of its lease (its next_attempt_at while the claim holds). */
export interface LeasedDelivery {
  deliveryId: string;
  leaseUntil: Date;
}

/**
 * Makes claimed deliveries due at `now` (a sender that will not post them), each only while its lease is still the
 * one stored: once it ended, another sender may have claimed it (a new lease), and that claim is left alone. One set
 * aside meanwhile (its endpoint disabled) stays set aside, no longer in the sender's hands: due at once when resumed.
 */
export async function releaseDeliveries(db: Db, deliveries: readonly LeasedDelivery[], now: Date): Promise<void> {
  if (deliveries.length === 0) return;
  await db.query(
    `WITH locked AS (SELECT delivery_id FROM webhooks.deliveries WHERE delivery_id = ANY($1::uuid[]) ORDER BY delivery_id FOR UPDATE)
     UPDATE webhooks.deliveries d SET next_attempt_at = CASE WHEN d.next_attempt_at IS NULL THEN NULL ELSE $3::timestamptz END, claimed_until = NULL
       FROM unnest($1::uuid[], $2::timestamptz[]) AS l(delivery_id, lease_until), locked k
      WHERE d.delivery_id = l.delivery_id AND k.delivery_id = d.delivery_id AND d.status = 'pending'
        AND (d.next_attempt_at = l.lease_until OR (d.next_attempt_at IS NULL AND d.claimed_until = l.lease_until))`,
    [deliveries.map((d) => d.deliveryId), deliveries.map((d) => d.leaseUntil), now],
  );
}

/** Ends the endpoint's failure streak (enabled again, or given a new URL): its next failure starts a new one. */
export async function clearFailureStreak(db: Db, endpointId: string): Promise<void> {
  await db.query('UPDATE webhooks.endpoint_health SET failing_since = NULL WHERE endpoint_id = $1 AND failing_since IS NOT NULL', [endpointId]);
}

/**
 * Forgets the attempt counts at 0 (every attempt of the endpoint purged: a deleted endpoint's row would stay
 * forever); a missing row reads as 0 and the log's triggers insert it again. Rows another transaction holds are left
 * for the next run, so this never waits on (or deadlocks with) a record counting attempts.
 */
export async function forgetEmptyAttemptCounts(db: Db): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM webhooks.attempt_counts
      WHERE endpoint_id IN (SELECT endpoint_id FROM webhooks.attempt_counts WHERE attempts = 0 FOR UPDATE SKIP LOCKED)`,
  );
  return rowCount ?? 0;
}

/**
 * Drops up to `limit` pending deliveries whose endpoint no longer exists, among those due before `staleBefore` (a
 * live endpoint's due deliveries are claimed within seconds). They are left when a fan-out batch that read the
 * endpoint before its deletion commits after the deletion dropped its deliveries: never claimable, never purged
 * (pending), and walked by every claim of every sender. Runs with the retention purge.
 */
export async function dropOrphanedDeliveries(db: Db, staleBefore: Date, now: Date, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE webhooks.deliveries SET status = 'dropped', next_attempt_at = NULL, completed_at = $2
      WHERE delivery_id IN (
        SELECT d.delivery_id FROM webhooks.deliveries d
         WHERE d.status = 'pending' AND d.next_attempt_at < $1
           AND NOT EXISTS (SELECT 1 FROM rm_webhooks.endpoints e WHERE e.endpoint_id = d.endpoint_id)
         ORDER BY d.next_attempt_at LIMIT $3)
        AND status = 'pending'`,
    [staleBefore, now, limit],
  );
  return rowCount ?? 0;
}

/**
 * One batch of the retention purge (src/workers/webhook-retention.ts): up to `limit` of the oldest attempts, those
 * logged before `before`, and up to `limit` deliveries finished before it (never a pending one). The attempts are
 * taken oldest first by id and then filtered (the filter inside the limited subquery: outside it, the planner reads
 * the whole log), so a batch reads `limit` rows however long the log is; ids follow the time of recording, and an
 * attempt recorded after a younger one waits for the next run. On a million attempts: 16 ms per 5,000 deleted,
 * 2 ms with nothing to delete (docs/webhooks.md, "Retention").
 */
export async function purgeWebhookLog(db: Db, before: Date, limit: number): Promise<{ attempts: number; deliveries: number }> {
  const attempts = await db.query(
    `DELETE FROM webhooks.attempts
      WHERE attempt_id IN (SELECT attempt_id FROM (SELECT attempt_id, attempted_at FROM webhooks.attempts ORDER BY attempt_id LIMIT $2) oldest
                            WHERE attempted_at < $1)`,
    [before, limit],
  );
  const deliveries = await db.query(
    `DELETE FROM webhooks.deliveries
      WHERE delivery_id IN (SELECT delivery_id FROM webhooks.deliveries WHERE status <> 'pending' AND completed_at < $1
                             ORDER BY completed_at LIMIT $2)`,
    [before, limit],
  );
  return { attempts: attempts.rowCount ?? 0, deliveries: deliveries.rowCount ?? 0 };
}

/**
 * One batch of the set-aside retention (docs/webhooks.md, "Retention"): deletes up to `limit` deliveries set aside
 * (pending with no due time: their endpoint disabled, by the client, a 410 or 5 days of failures) whose event was
 * queued before `before`, oldest first along the partial index deliveries_set_aside (migration 0019), so a batch
 * reads the rows it deletes whatever the backlog. One still in a sender's hands (its claim's lease running by the
 * caller's clock or Postgres's) is left to that sender's record; rows another transaction holds (a resume, a
 * record) are skipped, never waited for, so the purge cannot deadlock with them. The attempts logged for those of
 * them attempted in their schedule (`attempts` > 0: pending when the endpoint was disabled) go with them (regression
 * review 23b: such an attempt, younger than its delivery, outlived it by up to 3 days, counted but never listed, and a
 * deliveries page of only such attempts came back empty without a `next` link to the older ones). Returns how many
 * deliveries it deleted.
 */
export async function purgeExpiredSetAside(db: Db, before: Date, now: Date, limit: number): Promise<number> {
  const { rows } = await db.query<{ deliveries: number }>(
    `WITH gone AS (
       DELETE FROM webhooks.deliveries
        WHERE delivery_id IN (SELECT delivery_id FROM webhooks.deliveries
                               WHERE status = 'pending' AND next_attempt_at IS NULL AND created_at < $1
                                 AND (claimed_until IS NULL OR ${passedByBothClocks('claimed_until', '$2')})
                               ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
          AND status = 'pending' AND next_attempt_at IS NULL
       RETURNING delivery_id, endpoint_id, attempts
     ), attempted AS (
       DELETE FROM webhooks.attempts
        WHERE endpoint_id = ANY(ARRAY(SELECT DISTINCT endpoint_id FROM gone WHERE attempts > 0))
          AND delivery_id IN (SELECT delivery_id FROM gone WHERE attempts > 0)
     )
     SELECT count(*)::int AS deliveries FROM gone`,
    [before, now, limit],
  );
  return rows[0].deliveries;
}

export interface DeliveryAttemptView {
  attemptId: number;
  deliveryId: string;
  webhookId: string;
  eventType: string;
  attemptedAt: Date;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  nextRetryAt: Date | null;
  deliveryStatus: string;
}

/**
 * A page of an endpoint's attempts, newest first: those before attempt `before` (keyset: as deep as needed at the
 * cost of one page, and stable while new attempts arrive), or the `limit` just after attempt `after` (the keyset way
 * back), else after skipping `offset`. `olderFollow`: older attempts follow the page; `newerFollow` (only known with
 * `after`): newer ones precede it. The offset is taken over the attempt ids alone (the log's endpoint index), and
 * only the page's rows are read and joined. `count` is every attempt of the endpoint, kept by the log's triggers
 * (migration 0009), not counted.
 */
export async function listDeliveryAttempts(
  db: Db,
  endpointId: string,
  page: { limit: number; offset: number; before?: number; after?: number },
): Promise<{ count: number; olderFollow: boolean; newerFollow?: boolean; rows: DeliveryAttemptView[] }> {
  const count = await db.query<{ n: string }>('SELECT attempts AS n FROM webhooks.attempt_counts WHERE endpoint_id = $1', [endpointId]);
  const joined = `SELECT (SELECT count(*) FROM page)::int AS in_page, a.attempt_id, a.delivery_id, d.webhook_id, d.event_type, a.attempted_at,
                         a.status_code, a.latency_ms, a.error, a.next_retry_at, d.status
                    FROM page
                    JOIN webhooks.attempts a ON a.attempt_id = page.attempt_id
                    JOIN webhooks.deliveries d ON d.delivery_id = a.delivery_id
                   ORDER BY a.attempt_id DESC`;
  const view = (r: Record<string, any>): DeliveryAttemptView => ({
    attemptId: Number(r.attempt_id), deliveryId: r.delivery_id, webhookId: r.webhook_id, eventType: r.event_type, attemptedAt: r.attempted_at,
    statusCode: r.status_code, latencyMs: r.latency_ms, error: r.error, nextRetryAt: r.next_retry_at, deliveryStatus: r.status,
  });
  const total = Number(count.rows[0]?.n ?? 0);
  if (page.after === undefined) {
    const { rows } = await db.query({
      name: 'webhooks_list_attempts',
      text: `WITH page AS (SELECT attempt_id FROM webhooks.attempts
                         WHERE endpoint_id = $1 AND ($4::bigint IS NULL OR attempt_id < $4)
                         ORDER BY attempt_id DESC LIMIT $2 OFFSET $3)
             ${joined}`,
      values: [endpointId, page.limit + 1, page.before === undefined ? page.offset : 0, page.before ?? null],
    });
    // from the page of ids: an attempt whose delivery the retention purge already deleted has no row here
    return { count: total, olderFollow: (rows[0]?.in_page ?? 0) > page.limit, rows: rows.slice(0, page.limit).map(view) };
  }
  const { rows } = await db.query({
    name: 'webhooks_list_attempts_after',
    text: `WITH page AS (SELECT attempt_id FROM webhooks.attempts WHERE endpoint_id = $1 AND attempt_id > $3 ORDER BY attempt_id LIMIT $2) ${joined}`,
    values: [endpointId, page.limit, page.after],
  });
  const { rows: [around] } = await db.query<{ older: boolean; newer: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM webhooks.attempts WHERE endpoint_id = $1 AND attempt_id <= $2) AS older,
            EXISTS (SELECT 1 FROM webhooks.attempts WHERE endpoint_id = $1 AND attempt_id > $3) AS newer`,
    [endpointId, page.after, rows[0]?.attempt_id ?? page.after],
  );
  return { count: total, olderFollow: around.older, newerFollow: around.newer, rows: rows.map(view) };
}

/**
 * A pending delivery in a sender's hands (posted, or waiting in its lane): its claim's lease is running (by the
 * caller's clock or Postgres's: it ends when both have passed it) and its due time is still that lease, or none (set
 * aside since: its endpoint disabled). Recorded or given back, its claim's lease is cleared; never claimed, or by a
 * version before, it has none. Made due now, a second sender would post it beside the first request.
 */
const IN_FLIGHT = `COALESCE(status = 'pending' AND ${aheadByEitherClock('claimed_until', '$3::timestamptz')} AND (next_attempt_at = claimed_until OR next_attempt_at IS NULL), false)`;

/**
 * Queues a delivery of the endpoint again, due now (a failed one starts a fresh schedule); set aside instead while
 * the endpoint is disabled (due when it is enabled again); in a sender's hands, it is left there with the retry noted,
 * and the record of that attempt makes it due (recordAttempts). Undefined: no such delivery.
 */
export async function requeueDelivery(db: Db, endpointId: string, deliveryId: string, now: Date): Promise<{ webhookId: string } | undefined> {
  // a pending delivery keeps its attempts (its schedule still ends after about three days); a finished one starts afresh
  const { rows } = await db.query(
    `UPDATE webhooks.deliveries SET status = 'pending', attempts = CASE WHEN status = 'pending' THEN attempts ELSE 0 END, completed_at = NULL,
            retry_asked = ${IN_FLIGHT},
            next_attempt_at = CASE WHEN ${IN_FLIGHT} THEN next_attempt_at WHEN ${ENDPOINT_ENABLED} THEN $3::timestamptz END
      WHERE endpoint_id = $1 AND delivery_id = $2 RETURNING webhook_id`,
    [endpointId, deliveryId, now],
  );
  return rows[0] ? { webhookId: rows[0].webhook_id } : undefined;
}

/**
 * Queues again up to `limit` of the endpoint's deliveries marked failed in [from, to), the earliest failure first,
 * each with a fresh retry schedule: due at `now`, or set aside while the endpoint is disabled. Returns how many.
 */
export async function requeueFailedDeliveries(db: Db, endpointId: string, from: Date, to: Date, now: Date, limit: number): Promise<number> {
  const r = await db.query(
    `UPDATE webhooks.deliveries SET status = 'pending', attempts = 0, completed_at = NULL,
            next_attempt_at = CASE WHEN ${ENDPOINT_ENABLED} THEN $4::timestamptz END
      WHERE delivery_id IN (SELECT delivery_id FROM webhooks.deliveries
                             WHERE endpoint_id = $1 AND status = 'failed' AND completed_at >= $2 AND completed_at < $3
                             ORDER BY completed_at LIMIT $5)
        AND status = 'failed'`,
    [endpointId, from, to, now, limit],
  );
  return r.rowCount ?? 0;
}

/**
 * The WHERE of an update of endpoint `$1`'s pending deliveries matching `condition`: they are locked in delivery_id
 * order first (see the file's header), and the condition is checked again on the rows as locked.
 */
const pendingOfEndpointLocked = (condition: string) => `delivery_id IN (
    SELECT delivery_id FROM webhooks.deliveries WHERE endpoint_id = $1 AND status = 'pending' AND ${condition} ORDER BY delivery_id FOR UPDATE)
  AND status = 'pending' AND ${condition}`;

/** Sets a delivery just queued aside if its endpoint is disabled now (see setDeliveriesAside). */
export async function setAsideWhileDisabled(db: Db, endpointId: string, deliveryId: string): Promise<void> {
  await db.query(
    `UPDATE webhooks.deliveries SET next_attempt_at = NULL
      WHERE endpoint_id = $1 AND delivery_id = $2 AND status = 'pending' AND NOT ${ENDPOINT_ENABLED}`,
    [endpointId, deliveryId],
  );
}

/** Whether endpoint $1 is enabled now (false once deleted). */
const ENDPOINT_ENABLED = `COALESCE((SELECT e.enabled FROM rm_webhooks.endpoints e WHERE e.endpoint_id = $1), false)`;

/**
 * Sets a disabled endpoint's queued deliveries aside (no due time): the claim's scan of the due index stops before
 * them, so the deliveries of an endpoint disabled after days of failures cost every other endpoint's claims nothing.
 * A delivery in flight at that moment keeps its claim's lease (claimed_until) and, recorded while disabled, stays
 * set aside (recordAttempts).
 */
export async function setDeliveriesAside(db: Db, endpointId: string): Promise<void> {
  await db.query(
    `UPDATE webhooks.deliveries SET next_attempt_at = NULL WHERE ${pendingOfEndpointLocked('next_attempt_at IS NOT NULL')}`,
    [endpointId],
  );
}

/**
 * Makes the deliveries set aside while the endpoint was disabled due now (it was enabled again), but those still in a
 * sender's hands (their claim's attempt not recorded, its lease running by this clock or Postgres's): due at that lease again, so no claim takes
 * them beside their request in flight, and the record of its attempt decides what follows.
 */
export async function resumeDeliveries(db: Db, endpointId: string, now: Date): Promise<void> {
  await db.query(
    `UPDATE webhooks.deliveries SET next_attempt_at = CASE WHEN ${aheadByEitherClock('claimed_until', '$2')} THEN claimed_until ELSE $2 END
      WHERE ${pendingOfEndpointLocked('next_attempt_at IS NULL')}`,
    [endpointId, now],
  );
}

/** Drops the queued deliveries of a deleted endpoint. */
export async function dropPendingDeliveries(db: Db, endpointId: string, now: Date): Promise<void> {
  await db.query(
    `UPDATE webhooks.deliveries SET status = 'dropped', next_attempt_at = NULL, completed_at = $2 WHERE ${pendingOfEndpointLocked('true')}`,
    [endpointId, now],
  );
}
