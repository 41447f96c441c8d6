// The transport port for incoming records (provider notifications, chat messages).
// Adapters: src/adapters/kafka/transport.ts (production) and src/adapters/in-process/transport.ts.

export interface IncomingRecord {
  topic: string;
  key: string | null;
  value: unknown;
  /** adapter-specific coordinates, for logs and DLQ entries */
  partition?: number;
  offset?: string;
  headers?: Record<string, string>;
}

export interface OutgoingRecord {
  key: string | null;
  value: unknown;
  headers?: Record<string, string>;
}

/** Thrown by a handler for a record that can never be applied: it goes to `<topic>.dlq` with the reason. */
export class PoisonRecordError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'PoisonRecordError';
  }
}

/**
 * Rejection of publish() for records the transport can never write (larger than it may carry). `records` are the
 * indexes of those records in the publish (nothing of it was written); empty when the broker refused a request as
 * too large and the offending record is not known (a broker or topic limit below the transport's cap).
 */
export class RecordTooLargeError extends Error {
  override readonly name = 'RecordTooLargeError';
  constructor(message: string, readonly records: number[] = [], options?: ErrorOptions) {
    super(message, options);
  }
}

export type RecordHandler = (record: IncomingRecord) => Promise<void>;

/** What became of one record of a batch: applied, to be retried later, or never applicable (→ DLQ). */
export type RecordOutcome = { kind: 'ok' } | { kind: 'retry'; error: unknown } | { kind: 'poison'; reason: string };

/**
 * Handles several records of one partition at once (in offset order) and answers one outcome per record, in the
 * same order. Contract:
 * - `ok`: done; `poison`: dead-lettered with the reason; `retry`: not applied, handed again (with the other
 *   `retry` records of the call, in offset order) after a backoff;
 * - per-key order is the handler's to keep within a call: a record answered `retry` must not have been
 *   overtaken, so every later record with the same key in the call must be answered `retry` too;
 * - throwing = every record of the call is retried (nothing of it is acknowledged); handlers are idempotent.
 */
export type BatchHandler = (records: IncomingRecord[]) => Promise<RecordOutcome[]>;

export interface SubscribeOptions {
  /** consumer group (Kafka); ignored in-process */
  groupId: string;
  /** called for every record sent to the DLQ (metrics) */
  onDeadLetter?: (record: IncomingRecord, reason: string) => void;
  /**
   * How many records of one partition may be handled at once (default 1). Records with the same key are always
   * handled one after another in offset order; offsets are committed only past records that are all done.
   */
  keyedConcurrency?: number;
  /**
   * Hand records to this batch handler instead of the per-record `handler`. Kafka: the records of a fetched
   * partition batch, in slices of at most `maxBatchRecords`; offsets are committed only past records that are all
   * done (`ok` or dead-lettered). In-process: one record per call. `keyedConcurrency` does not apply.
   */
  batchHandler?: BatchHandler;
  /** most records per batchHandler call (default 500) */
  maxBatchRecords?: number;
}

export interface Subscription {
  /** stops taking records, lets the in-flight handler finish, commits what succeeded */
  stop(): Promise<void>;
}

export interface RecordTransport {
  readonly kind: 'kafka' | 'in-process';
  /** resolves only once the records are durably acknowledged (Kafka acks=-1 / handler done in-process) */
  publish(topic: string, records: OutgoingRecord[]): Promise<void>;
  /**
   * Handler contract: resolve = done (offset committed); throw PoisonRecordError = dead-letter and move on;
   * any other error = transient, retried with backoff without committing. With `options.batchHandler`, that
   * handler gets the records instead (see BatchHandler).
   */
  subscribe(topic: string, handler: RecordHandler, options: SubscribeOptions): Promise<Subscription>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export const dlqTopic = (topic: string): string => `${topic}.dlq`;

/** A dead letter's headers: the record's own, the reason, and where it was read (topic, and partition and offset if known). */
/** Longest dead-letter reason kept (a reason may quote the record, which may be what is too large). */
export const DLQ_REASON_MAX = 1_000;

export const shortenReason = (reason: string): string =>
  reason.length <= DLQ_REASON_MAX ? reason : `${reason.slice(0, DLQ_REASON_MAX)}… (${reason.length - DLQ_REASON_MAX} more characters)`;

export function deadLetterHeaders(
  headers: Record<string, string>,
  reason: string,
  source: { topic: string; partition?: number | null; offset?: string | null },
): Record<string, string> {
  return {
    ...headers,
    'x-dlq-reason': shortenReason(reason),
    'x-original-topic': source.topic,
    ...(source.partition === undefined || source.partition === null ? {} : { 'x-original-partition': String(source.partition) }),
    ...(source.offset === undefined || source.offset === null ? {} : { 'x-original-offset': source.offset }),
  };
}
