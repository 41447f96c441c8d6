// The parked-status sweeper (docs/sends.md, "Delivery consumer"): runs with the delivery consumer (started and
// stopped with it). Every `intervalMs`, under a session advisory lock (one sweeper at work across processes), it
// takes the oldest parked statuses (parked-statuses.ts) in parking order and, per provider id:
//  - owner known (the owner indexes, one query; else a keyed send reconciled from the status's client reference):
//    applies them one after the other through the live records' path (same appliers, same deterministic event ids,
//    so a repeat is a no-op), deleting each right after its apply; one that can never apply (PoisonRecordError) is
//    dead-lettered with its reason; a transient failure leaves it and the later ones of its id for the next sweep;
//  - owner still unknown: a status parked longer than the grace period is dead-lettered with the reason a live
//    record got before parking existed, and deleted; the others wait.
// Dead letters go to the consumer's `<topic>.dlq` as the transport writes them (the record's key and value,
// x-dlq-reason, x-original-topic/-partition/-offset headers) and through the consumer's `onDeadLetter` (metrics,
// log). A crash between an apply and its delete re-applies it next time: a no-op.
import type { Services } from '../services';
import { deadLetterHeaders, dlqTopic, type IncomingRecord, PoisonRecordError, RecordTooLargeError } from '../ports/transport';
import type { ProviderMessageOwner } from '../projections/sends/queries';
import type { ProviderStatusUpdate } from '../commands/delivery-status';
import { withSessionLock } from '../shared/tx';
import { isObject, parseStatusRecord } from './delivery-status-parsing';
import { deleteParked, type ParkedRow, parkedAfter, parkedBefore } from './parked-statuses';
import { findProviderMessageOwners, reconciledOwner } from './provider-message-owners';

const SWEEP_LOCK = 'delivery:parked-provider-statuses';

export interface ParkedStatusSweeperOptions {
  /** the topic the consumer takes the statuses from: dead letters go to `<topic>.dlq` */
  topic: string;
  /** a parked status whose owner is still unknown this long after it was parked is dead-lettered */
  graceMs: number;
  /** pause between sweeps */
  intervalMs: number;
  /** most parked statuses looked at per sweep (default 1000) */
  batchSize?: number;
  /** the live records' path: the owner kind's applier */
  apply: (owner: ProviderMessageOwner, update: ProviderStatusUpdate) => Promise<void>;
  /** what the consumer does for a dead letter (metrics, log) */
  onDeadLetter: (record: IncomingRecord, reason: string) => void;
}

export interface SweepReport {
  applied: number;
  deadLettered: number;
  /** parked statuses looked at and left for a later sweep */
  left: number;
}

const isPoison = (err: unknown): err is PoisonRecordError =>
  err instanceof PoisonRecordError || (err instanceof Error && err.name === 'PoisonRecordError');

/** The reason a status whose owner never became known is dead-lettered with (the same as before parking). */
export const unknownOwnerReason = (update: { providerMessageId: string; status: string }, graceMs: number) =>
  `unknown provider message id ${update.providerMessageId} (status ${update.status}) after ${graceMs} ms`;

/** Longest key a dead letter without its value keeps (deadLetterHeaders shortens its reason). */
const OMITTED_KEY_MAX = 1_000;

/**
 * Publishes a parked record to `<topic>.dlq` as the transport's own dead-letter path does, then `onDeadLetter`. One
 * the transport refuses as too large (a record near its limit, plus the dead-letter headers) is written without
 * its value, the value's size in `x-dlq-value-omitted`, as the transport does for live records.
 */
async function deadLetter(services: Services, options: ParkedStatusSweeperOptions, record: IncomingRecord, reason: string): Promise<void> {
  const source = { topic: record.topic, partition: record.partition, offset: record.offset };
  try {
    await services.transport.publish(dlqTopic(options.topic), [{ key: record.key, value: record.value, headers: deadLetterHeaders(record.headers ?? {}, reason, source) }]);
  } catch (err) {
    if (!(err instanceof RecordTooLargeError)) throw err;
    const omitted = { 'x-dlq-value-omitted': String(Buffer.byteLength(JSON.stringify(record.value ?? null))) };
    await services.transport.publish(dlqTopic(options.topic), [{
      key: record.key === null ? null : record.key.slice(0, OMITTED_KEY_MAX),
      value: null,
      headers: deadLetterHeaders(omitted, reason, source),
    }]);
  }
  try {
    options.onDeadLetter({ ...record, topic: options.topic }, reason);
  } catch {
    // a metrics callback must not turn a dead letter into a failure
  }
}

/**
 * Where the next sweep starts: sweeps go round the parked statuses `batchSize` at a time, so statuses whose owner
 * appeared are reached however many older ones still wait for theirs (the oldest only, every time, would leave
 * them behind a thousand unknown ids until the grace).
 */
export interface SweepCursor {
  afterSeq: string;
}

/**
 * The next round of parked statuses from the cursor (wrapping to the oldest at the end), whole provider ids only:
 * a full round ends before the last id's statuses, which the next round takes together (they apply in order), and it
 * takes the statuses of its ids parked before it too (an id's statuses always apply from its oldest).
 */
async function nextRound(services: Services, cursor: SweepCursor, options: ParkedStatusSweeperOptions): Promise<ParkedRow[]> {
  const limit = options.batchSize ?? 1000;
  let fetched = await parkedAfter(services.pool, cursor.afterSeq, options.graceMs, limit);
  if (fetched.length === 0 && cursor.afterSeq !== '0') fetched = await parkedAfter(services.pool, '0', options.graceMs, limit);
  let rows = fetched;
  if (fetched.length === limit) {
    const last = fetched[fetched.length - 1].providerMessageId;
    const whole = fetched.filter((r) => r.providerMessageId !== last);
    if (whole.length > 0) rows = whole; // else one id fills the round: taken as it is, the rest of it next time
  }
  // the end of the table reached: the next round starts again from the oldest
  cursor.afterSeq = fetched.length < limit || rows.length === 0 ? '0' : rows[rows.length - 1].seq;
  if (rows.length === 0) return rows;
  // statuses of these ids parked before the round (left by an earlier round: no owner then) come first, in order
  const earlier = await parkedBefore(services.pool, [...new Set(rows.map((r) => r.providerMessageId))], rows[0].seq, options.graceMs);
  return earlier.length === 0 ? rows : [...earlier, ...rows].sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
}

/** One sweep; undefined when another process's sweeper holds the lock. */
export async function sweepParkedStatuses(
  services: Services,
  options: ParkedStatusSweeperOptions,
  stopping: () => boolean = () => false,
  cursor: SweepCursor = { afterSeq: '0' },
): Promise<SweepReport | undefined> {
  return withSessionLock(services.pool, SWEEP_LOCK, async () => {
    const report: SweepReport = { applied: 0, deadLettered: 0, left: 0 };
    const deadLetterParked = async (row: ParkedRow, reason: string) => {
      await deadLetter(services, options, row.record, reason);
      await deleteParked(services.pool, row.seq);
      report.deadLettered++;
    };
    const rows = await nextRound(services, cursor, options);
    if (rows.length === 0) return report;
    const byId = new Map<string, ParkedRow[]>();
    for (const row of rows) {
      const group = byId.get(row.providerMessageId);
      if (group) group.push(row);
      else byId.set(row.providerMessageId, [row]);
    }
    const owners = await findProviderMessageOwners(services, [...byId.keys()]);

    for (const [id, group] of byId) {
      if (stopping()) {
        report.left += group.length;
        continue;
      }
      let owner = owners.get(id);
      for (let k = 0; k < group.length; k++) {
        const row = group[k];
        const { record } = row;
        try {
          let update: ProviderStatusUpdate | null;
          try {
            if (!isObject(record.value)) throw new PoisonRecordError('record value is not a JSON object');
            update = parseStatusRecord(record.value);
          } catch (err) {
            if (!isPoison(err)) throw err;
            await deadLetterParked(row, err.reason || err.message);
            continue;
          }
          if (!update) {
            await deleteParked(services.pool, row.seq); // a status we do not track: never parked in practice
            continue;
          }
          // [issue 16] a keyed send that lost its answer is reconciled from the status, as on the live path
          if (!owner && update.clientReference !== undefined) owner = await reconciledOwner(services, update);
          if (!owner) {
            if (!row.expired) {
              report.left += group.length - k; // later statuses of this id wait behind it
              break;
            }
            await deadLetterParked(row, unknownOwnerReason(update, options.graceMs));
            continue;
          }
          try {
            await options.apply(owner, update);
          } catch (err) {
            if (!isPoison(err)) throw err;
            await deadLetterParked(row, err.reason || err.message);
            continue;
          }
          await deleteParked(services.pool, row.seq);
          report.applied++;
        } catch (err) {
          // transient (the store, the transport): this status and the later ones of its id stay for the next sweep
          services.logger.warn({ err, providerMessageId: id, seq: row.seq }, 'parked provider status not handled; retrying on the next sweep');
          report.left += group.length - k;
          break;
        }
      }
    }
    if (report.applied > 0 || report.deadLettered > 0) services.logger.info(report, 'parked provider statuses swept');
    return report;
  });
}

/** Sweeps every `intervalMs` (never two sweeps of this process at once); `stop` waits for a sweep in progress. */
export function startParkedStatusSweeper(services: Services, options: ParkedStatusSweeperOptions): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const cursor: SweepCursor = { afterSeq: '0' };
  const tick = () => {
    running = sweepParkedStatuses(services, options, () => stopped, cursor)
      .then(() => undefined, (err: unknown) => services.logger.warn({ err }, 'parked provider status sweep failed'))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, options.intervalMs);
      });
  };
  timer = setTimeout(tick, options.intervalMs);
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
