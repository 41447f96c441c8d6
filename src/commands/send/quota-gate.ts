// The quota gate of single sends (docs/sends.md, "Quota gate"). A tiered number sends to a new recipient only while
// the unique recipients of its last 24 h (the accounts read model) plus its sends to new recipients still in flight
// leave room, so concurrent sends, in one process or in several sharing the database, stay within the tier.
// - Far from the limit (more than GUARD_BELOW left): one read, as before the gate; the admission is counted in
//   this process only (its own checks near the limit count it).
// - Near it: the check and a reservation of the recipient are made under a transaction-scoped advisory lock per
//   number; a reservation counts until the read model shows its recipient, or until it expires (a crashed
//   request's does), and is deleted once its send is answered.
// A recipient the number already sent to in the window uses no quota: admitted by the read alone, when it stays in the
// window until this send is recorded (a reservation's lifetime). One leaving it sooner is reserved like a new one, in
// the slot it holds: else its slot, freed at the window's edge while its send is at the provider, went to another.
// Bulk claims near the limit take the same lock and reserve their recipients in the same table, and count these
// reservations (src/commands/bulk/work-claims.ts): single and bulk sends of a number share one accounting there.
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { Logger } from 'pino';
import { dailyLimitOf, type MessagingTier, QUOTA_WINDOW_MS, quotaWindow, usedSql } from '../../projections/accounts/queries';
import { againOnLostConnection } from '../../shared/retry';
import { withTransaction } from '../../shared/tx';
import { ACCOUNTS_CHANGED_CHANNEL, markChanging } from '../../projections/change-signals';
import { outcomeUnknownRecipientsSql } from '../bulk/work-unknown-outcomes';
import { aheadByEitherClock } from '../../shared/both-clocks';

/**
 * Remaining unique recipients at or under which sends to new recipients are reserved under the lock. A send admitted
 * above it is seen by other processes only once answered: the bound holds unless more than this many new recipients
 * of the number are admitted while one such send is at the provider (the choice: docs/sends.md, "Quota gate").
 */
export const GUARD_BELOW = 1_000;

/** The advisory lock of a number's quota: the single sends' locked check and the bulk claims take it alike. */
export const quotaLockKey = (numberId: number): string => `send-quota:${numberId}`;

/**
 * Remaining unique recipients at or under which a bulk claim reserves its recipients, so that single sends count
 * them: twice the guard, so that the bulk's recipients claimed before without a reservation are in the read model
 * long before the single sends' locked check counts exactly (docs/bulk.md, "Quota").
 */
export const BULK_RESERVES_BELOW = 2 * GUARD_BELOW;

/**
 * How long a bulk recipient's reservation outlives its in-flight lease: its outcome appended (the lease sweep
 * appends a batch left behind after 30 s, every 15 s) and projected into the read model, with a margin.
 */
export const BULK_RESERVATION_AFTER_LEASE_MS = 60_000;

/** the provider's longest call when it declares none (the sandbox) */
const DEFAULT_CALL_MS = 10_000;
/** after the provider's answer: the append and the read-your-writes wait (10 s at most), with a margin */
const RECORDING_MS = 20_000;

/**
 * Whether a reservation (its expiry written with its own process's clock) still counts at `now` (the process's clock,
 * a parameter): until both that clock and Postgres's have passed its expiry. A process whose clock runs ahead of the
 * reserving one's then neither stops counting nor deletes a reservation early (docs/reliability.md, "Clocks of several
 * processes"); a process whose clock is behind counts a reservation longer, which only refuses sooner.
 */
export const liveReservation = (expiresAt: string, now: string): string => aheadByEitherClock(expiresAt, now);

// bulk recipients whose outcome is unknown count as reserved (not in the read model) and put theirs in the window
const GATE_SQL = `SELECT ${usedSql('$1', '$2', '$3', '$4')} AS used,
  (SELECT count(DISTINCT r.recipient)::int FROM (
     SELECT recipient FROM public.send_quota_reservations WHERE number_id = $1 AND ${liveReservation('expires_at', '$6')}
     UNION ALL SELECT recipient FROM (${outcomeUnknownRecipientsSql('$1', '$3')}) u) r
    WHERE NOT EXISTS (SELECT 1 FROM rm_accounts.quota_recipients q
                       WHERE q.number_id = $1 AND q.recipient = r.recipient AND q.last_sent_at > $3)) AS reserved,
  (EXISTS (SELECT 1 FROM rm_accounts.quota_recipients q WHERE q.number_id = $1 AND q.recipient = $5 AND q.last_sent_at > $3)
   OR EXISTS (SELECT 1 FROM (${outcomeUnknownRecipientsSql('$1', '$3')}) u WHERE u.recipient = $5)) AS in_window,
  (EXISTS (SELECT 1 FROM rm_accounts.quota_recipients q WHERE q.number_id = $1 AND q.recipient = $5 AND q.last_sent_at > $7)
   OR EXISTS (SELECT 1 FROM (${outcomeUnknownRecipientsSql('$1', '$7')}) u WHERE u.recipient = $5)) AS stays_in_window,
  EXISTS (SELECT 1 FROM public.send_quota_reservations r WHERE r.number_id = $1 AND r.recipient = $5 AND ${liveReservation('r.expires_at', '$6')}) AS recipient_reserved`;

/**
 * The slot a recipient in the window holds now, which its new send carries over when it leaves the window before that
 * send is recorded (reservation, not a second slot).
 */
const ownSlot = (read: GateRead): number => (read.in_window && !read.stays_in_window ? 1 : 0);

interface GateRead {
  used: number;
  /** new recipients reserved by sends in flight (any process), not yet in the read model */
  reserved: number;
  /** the recipient is in the window now (counted in `used`) */
  in_window: boolean;
  /** ... and stays in it until this send is recorded (its reservation's lifetime from now): the send takes no room */
  stays_in_window: boolean;
  recipient_reserved: boolean;
}

export interface QuotaRefusal {
  /** unique recipients in the window, in flight included */
  used: number;
  dailyLimit: number;
}

export interface QuotaCheck {
  numberId: number;
  tier: MessagingTier;
  /** E.164 */
  recipient: string;
  now: Date;
}

/** What one request's admissions hold until it is answered (./send-template.ts gives them back). */
export class QuotaHolds {
  readonly counted: number[] = [];
  readonly reservations: string[] = [];
  /** the gate was asked (a tiered number): false for TIER_UNLIMITED, which no quota limits */
  checked = false;

  constructor(private readonly gate: SendQuotaGate) {}

  /**
   * A keyed send answered 503 SEND_OUTCOME_UNKNOWN: the provider may have the message, and no event the read model
   * counts says so until a status reconciles it or a repeat records it interrupted. Its recipient is then held for the
   * 24 h from the request (the quota window of a sent message): this request's reservation is extended (or one made,
   * when it was admitted without one: far from the limit, or in the window already), unless one held that long is
   * there (an earlier answer of the same request). One statement, on the 503's path only (docs/sends.md, "Quota gate").
   */
  async keepForOutcomeUnknown(request: { companyId: number; numberId: number; recipientE164: string; requestedAt: string }): Promise<void> {
    for (const numberId of this.counted.splice(0)) this.gate.uncount(numberId);
    const ids = this.reservations.splice(0);
    if (!this.checked) return;
    const until = new Date(Date.parse(request.requestedAt) + QUOTA_WINDOW_MS);
    await this.gate.holdUntil(ids, request.numberId, request.recipientE164, until, request.companyId);
  }

  /**
   * Gives the admissions back once the send is answered: sent (the read model shows the recipient) or not sent.
   * `keepReservations` when the outcome is not known: they then count until they expire.
   */
  async release(keepReservations = false): Promise<void> {
    for (const numberId of this.counted.splice(0)) this.gate.uncount(numberId);
    const ids = this.reservations.splice(0);
    if (!keepReservations && ids.length > 0) await this.gate.unreserve(ids);
  }
}

export class SendQuotaGate {
  /** admissions above GUARD_BELOW in flight in this process, per number */
  private readonly inFlight = new Map<number, number>();
  /** per number: one lock transaction at a time from this process (so waiting for it takes one connection) */
  private readonly queues = new Map<number, Promise<unknown>>();

  constructor(
    private readonly pool: Pool,
    private readonly logger: Logger,
    private readonly reservationTtlMs: number,
    private readonly guardBelow = GUARD_BELOW,
  ) {}

  /** Admits the send (its holds go to `holds`), or answers why not. */
  async admit(holds: QuotaHolds, check: QuotaCheck): Promise<QuotaRefusal | undefined> {
    holds.checked = true;
    const read = await this.read(this.pool, check);
    if (read.stays_in_window) return undefined;
    const left = dailyLimitOf(check.tier) - read.used - read.reserved - this.countOf(check.numberId) + ownSlot(read);
    if (left > this.guardBelow) {
      this.inFlight.set(check.numberId, this.countOf(check.numberId) + 1);
      holds.counted.push(check.numberId);
      return undefined;
    }
    return this.serially(check.numberId, () => this.reserve(holds, check));
  }

  uncount(numberId: number): void {
    const n = this.countOf(numberId) - 1;
    if (n > 0) this.inFlight.set(numberId, n);
    else this.inFlight.delete(numberId);
  }

  async unreserve(ids: string[]): Promise<void> {
    await this.pool.query('DELETE FROM public.send_quota_reservations WHERE reservation_id = ANY($1::uuid[])', [ids]).catch((err: Error) => {
      this.logger.warn({ err, reservations: ids }, 'quota reservations not deleted: they count until they expire');
    });
  }

  /**
   * Holds `recipient` of `numberId` reserved until `until` (QuotaHolds.keepForOutcomeUnknown): the reservations `ids`
   * are extended, or a new one inserted when none of them is left; nothing when a reservation of the recipient already
   * lasts that long. Not deleted with the answer, it counts in the gate and the bulk claims like any reservation (until
   * the read model has the recipient in its window) and is deleted once expired. GET business-accounts counts it too
   * (`reservedSql`): the company's cached view is told in the same statement.
   */
  async holdUntil(ids: string[], numberId: number, recipient: string, until: Date, companyId: number): Promise<void> {
    markChanging(ACCOUNTS_CHANGED_CHANNEL, companyId);
    await this.pool.query({
      name: 'send_quota_hold_unknown',
      text: `WITH covered AS (
               SELECT 1 FROM public.send_quota_reservations WHERE number_id = $3 AND recipient = $4 AND expires_at >= $5 LIMIT 1),
             kept AS (
               UPDATE public.send_quota_reservations SET expires_at = $5
                WHERE reservation_id = ANY($1::uuid[]) AND number_id = $3 AND recipient = $4 AND NOT EXISTS (SELECT 1 FROM covered)
                RETURNING 1),
             inserted AS (
               INSERT INTO public.send_quota_reservations (reservation_id, number_id, recipient, expires_at)
               SELECT $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM covered) AND NOT EXISTS (SELECT 1 FROM kept)
               RETURNING 1)
             SELECT pg_notify('${ACCOUNTS_CHANGED_CHANNEL}', $6::text) WHERE EXISTS (SELECT 1 FROM kept) OR EXISTS (SELECT 1 FROM inserted)`,
      values: [ids, randomUUID(), numberId, recipient, until, String(companyId)],
    }).catch((err: Error) => {
      this.logger.warn({ err, numberId, reservations: ids }, 'quota reservation of a send whose outcome is unknown not kept for 24 h: it counts until it expires');
    });
  }

  private async reserve(holds: QuotaHolds, check: QuotaCheck): Promise<QuotaRefusal | undefined> {
    const { numberId, recipient, now } = check;
    const id = randomUUID();
    // a transaction cut under it (its connection lost, or ended by Postgres after sitting idle: a process paused in it,
    // review 15f) reserved nothing, or its reservation under the same id: tried again on a fresh connection
    const locked = () => withTransaction(this.pool, async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [quotaLockKey(numberId)]);
      const read = await this.read(tx, check);
      if (read.stays_in_window) return 'free' as const;
      // a recipient leaving the window before this send is recorded: reserved (counted by all once it has left), in its own slot
      const used = read.used + read.reserved + this.countOf(numberId) - ownSlot(read);
      const dailyLimit = dailyLimitOf(check.tier);
      // another send in flight to the same new recipient: this one takes no more room
      if (!read.recipient_reserved && used >= dailyLimit) return { used, dailyLimit };
      // the number's expired reservations (counted no more) are deleted on the way, skipping rows another statement
      // holds: waiting there while holding rows an answered request deletes next could deadlock (docs/sends.md)
      await tx.query(
        `WITH expired AS (
           DELETE FROM public.send_quota_reservations WHERE reservation_id IN (
             SELECT reservation_id FROM public.send_quota_reservations WHERE number_id = $2 AND NOT ${liveReservation('expires_at', '$5')} FOR UPDATE SKIP LOCKED))
         INSERT INTO public.send_quota_reservations (reservation_id, number_id, recipient, expires_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (reservation_id) DO NOTHING`,
        [id, numberId, recipient, new Date(now.getTime() + this.reservationTtlMs), now],
      );
      return 'reserved' as const;
    });
    const outcome = await locked().catch((err: unknown) =>
      againOnLostConnection(err, locked, (e, attempt) => this.logger.warn({ err: e, numberId, attempt }, 'quota check lost its connection; trying again')));
    if (outcome === 'reserved') holds.reservations.push(id);
    return typeof outcome === 'object' ? outcome : undefined;
  }

  private async read(db: Pool | PoolClient, { numberId, recipient, now }: QuotaCheck): Promise<GateRead> {
    const w = quotaWindow(now);
    const staysAfter = new Date(w.start.getTime() + this.reservationTtlMs);
    const r = await db.query<GateRead>({
      name: 'send_quota_gate', text: GATE_SQL, values: [numberId, w.edgeMinute, w.start, w.edgeEnd, recipient, now, staysAfter],
    });
    return r.rows[0];
  }

  private countOf(numberId: number): number {
    return this.inFlight.get(numberId) ?? 0;
  }

  private serially<T>(numberId: number, fn: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(numberId) ?? Promise.resolve()).then(fn, fn);
    const tail = run.catch(() => undefined);
    this.queues.set(numberId, tail);
    void tail.then(() => {
      if (this.queues.get(numberId) === tail) this.queues.delete(numberId);
    });
    return run;
  }
}

/**
 * Deletes expired reservations of every number (the lease sweep's, src/workers/bulk-lease-cron.ts): a number whose
 * sends stay far from the limit never deletes its own. Skips rows another statement is deleting (no waits, so no
 * deadlock); at most `limit` rows a call. Returns how many were deleted.
 */
export async function purgeExpiredQuotaReservations(pool: Pool, now: Date, limit = 10_000): Promise<number> {
  const r = await pool.query(
    `DELETE FROM public.send_quota_reservations WHERE reservation_id IN (
       SELECT reservation_id FROM public.send_quota_reservations WHERE NOT ${liveReservation('expires_at', '$1')} LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [now, limit],
  );
  return r.rowCount ?? 0;
}

const gates = new WeakMap<object, SendQuotaGate>();

/** The gate of a set of services (one per runner, so per process in production, per test context in tests). */
export function sendQuotaGateOf(services: {
  pool: Pool;
  logger: Logger;
  runner: object;
  provider: { maxCallMs?: number };
}): SendQuotaGate {
  let gate = gates.get(services.runner);
  if (!gate) {
    gate = new SendQuotaGate(services.pool, services.logger, (services.provider.maxCallMs ?? DEFAULT_CALL_MS) + RECORDING_MS);
    gates.set(services.runner, gate);
  }
  return gate;
}
