// Claims of work rows (pending → in_flight) for the dispatcher: without quota (TIER_UNLIMITED), and with a
// number's daily limit over the rolling 24 h quota window.
import type { Pool, PoolClient } from 'pg';
import { QUOTA_WINDOW_MS } from '../../projections/accounts/queries';
import { withTransaction } from '../../shared/tx';
import { deterministicUuid } from '../send/ids';
import { BULK_RESERVATION_AFTER_LEASE_MS, BULK_RESERVES_BELOW, liveReservation, quotaLockKey } from '../send/quota-gate';
import { outcomeUnknownRecipientsSql } from './work-unknown-outcomes';

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

// bulk rows whose outcome is unknown count as sent (./work-unknown-outcomes.ts); the single sends' (and bulk
// claims') live reservations of recipients in flight (src/commands/send/quota-gate.ts) have no time: they leave the
// window only by being sent (then in the read model) or given back
const WINDOW_UNION = `
  SELECT recipient AS r, last_sent_at AS t FROM rm_accounts.quota_recipients WHERE number_id = $number AND last_sent_at > $since
  UNION ALL
  SELECT e164, claimed_at FROM bulk_work.recipients WHERE number_id = $number AND state IN ('in_flight', 'sent') AND claimed_at > $since
  UNION ALL
  ${outcomeUnknownRecipientsSql('$number', '$since')}
  UNION ALL
  SELECT recipient, NULL FROM public.send_quota_reservations WHERE number_id = $number AND ${liveReservation('expires_at', '$now')}`;

/** Whether the number sent to `recipient` (an SQL expression) in the window, or a bulk has it in flight or may have sent it. */
const sentOrClaimed = (recipient: string) => `(
  EXISTS (SELECT 1 FROM rm_accounts.quota_recipients q WHERE q.number_id = $number AND q.recipient = ${recipient} AND q.last_sent_at > $since)
  OR EXISTS (SELECT 1 FROM bulk_work.recipients w WHERE w.number_id = $number AND w.e164 = ${recipient}
                AND w.state IN ('in_flight', 'sent') AND w.claimed_at > $since)
  OR EXISTS (SELECT 1 FROM (${outcomeUnknownRecipientsSql('$number', '$since')}) u WHERE u.recipient = ${recipient}))`;

const IN_WINDOW = `(${sentOrClaimed('r.e164')}
  OR EXISTS (SELECT 1 FROM public.send_quota_reservations s WHERE s.number_id = $number AND s.recipient = r.e164 AND ${liveReservation('s.expires_at', '$now')}))`;

/** The reservation of a bulk recipient (one id per row, so a retry's claim renews it and its outcome finds it). */
export const bulkReservationId = (bulkId: string, idx: number): string => deterministicUuid('bulk-quota-reservation', `${bulkId}:${idx}`);

/**
 * Reserves a claimed window's recipients for the single sends' quota gate to count (the number is near its limit),
 * until their lease plus the recording; deletes on the way the number's reservations counted no more (expired, or
 * whose recipient the read model shows in the window for as long as the reservation lasts), skipping rows another statement is deleting (no waits: no deadlock).
 */
async function reserveClaimed(client: PoolClient, args: ClaimArgs & { numberId: number }, claimed: readonly ClaimedRecipient[]) {
  // a reservation outlasting its recipient's read-model entry stays (a keyed 503's 24-h hold of a recipient sent to
  // 23 h before: deleted, it counted nowhere once the earlier send left the window; regression review 13)
  await client.query(
    `WITH gone AS (
       DELETE FROM public.send_quota_reservations WHERE reservation_id IN (
         SELECT s.reservation_id FROM public.send_quota_reservations s
          WHERE s.number_id = $1 AND s.reservation_id <> ALL($4::uuid[])
            AND (NOT ${liveReservation('s.expires_at', '$3')} OR EXISTS (SELECT 1 FROM rm_accounts.quota_recipients q
                                                WHERE q.number_id = $1 AND q.recipient = s.recipient
                                                  AND q.last_sent_at > s.expires_at - $6 * interval '1 millisecond'))
          FOR UPDATE SKIP LOCKED))
     INSERT INTO public.send_quota_reservations (reservation_id, number_id, recipient, expires_at)
     SELECT id, $1, recipient, $2 FROM unnest($4::uuid[], $5::text[]) AS c(id, recipient)
     ON CONFLICT (reservation_id) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
    [
      args.numberId, new Date(args.leaseUntil.getTime() + BULK_RESERVATION_AFTER_LEASE_MS), args.now,
      claimed.map((c) => bulkReservationId(args.bulkId, c.idx)), claimed.map((c) => c.e164), QUOTA_WINDOW_MS,
    ],
  );
}

/**
 * Claims for a number with a daily limit: serialised per number (the quota's advisory lock, shared with the single
 * sends' gate), counts the unique recipients of the rolling 24 h window (the accounts read model, plus this work
 * table's sent and in-flight rows, which the read model may not have yet, and its failed rows whose outcome is
 * unknown, plus the live quota reservations of sends in flight), and claims recipients already in the window freely
 * and new ones only while room remains.
 * Near the limit the claimed recipients are reserved too, so that single sends count them.
 */
export async function claimRecipientsWithQuota(pool: Pool, args: ClaimArgs & { numberId: number; dailyLimit: number }): Promise<QuotaClaim> {
  const since = new Date(args.now.getTime() - QUOTA_WINDOW_MS);
  const names = { bulk: 1, now: 2, number: 3, since: 4 };
  const base = [args.bulkId, args.now, args.numberId, since];
  return withTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [quotaLockKey(args.numberId)]);
    const windowNames = { number: 1, since: 2, now: 3 };
    const usedRow = await client.query<{ n: number }>(
      sql(`SELECT count(DISTINCT u.r)::int AS n FROM (${WINDOW_UNION}) u`, windowNames),
      [args.numberId, since, args.now],
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
    if (claimed.length > 0 && remaining <= BULK_RESERVES_BELOW) await reserveClaimed(client, args, claimed);
    let resumeAt: Date | null = null;
    const blocked = claimed.length === 0 && candidates.rows.length > 0;
    if (blocked) resumeAt = await whenRoomMayFree(client, args.numberId, since, args.now);
    return { claimed, used, limit: args.dailyLimit, blocked, resumeAt };
  });
}

/**
 * When a blocked claim should look again: when the window's oldest entry leaves it, or sooner when sends of other
 * requests are in flight on new recipients (a live reservation of a recipient neither in the read model nor among
 * this table's rows): if refused, their room comes back; when their reservation expires, it is counted no more.
 */
async function whenRoomMayFree(client: PoolClient, numberId: number, since: Date, now: Date): Promise<Date> {
  const r = await client.query<{ t: Date | null; reserved_until: Date | null }>(
    sql(
      // a reservation counts until Postgres's clock has passed it too: by this process's clock, when that clock runs
      // ahead, that is its expiry plus the lead (regression review 18: a resumeAt already past paused the bulk again
      // and again until Postgres's clock passed the expiry)
      `SELECT (SELECT min(u.t) FROM (${WINDOW_UNION}) u) AS t,
              (SELECT min(s.expires_at) + greatest(interval '0', $now::timestamptz - now()) FROM public.send_quota_reservations s
                WHERE s.number_id = $number AND ${liveReservation('s.expires_at', '$now')} AND NOT ${sentOrClaimed('s.recipient')}) AS reserved_until`,
      { number: 1, since: 2, now: 3 },
    ),
    [numberId, since, now],
  );
  const { t, reserved_until: reservedUntil } = r.rows[0];
  const oldestLeaves = t ? new Date(t.getTime() + QUOTA_WINDOW_MS + 1) : new Date(now.getTime() + 1000);
  return reservedUntil && reservedUntil < oldestLeaves ? new Date(reservedUntil.getTime() + 1) : oldestLeaves;
}
