// In-process adapter of the record transport (the embedded default: `npm start`, tests). See
// src/ports/transport.ts for the contract; this adapter keeps the same semantics where they apply:
//
// - publish() hands each record straight to the subscribed handlers and resolves only once they have all
//   finished, so a webhook answered 200 means its records were applied. Records of one publish() call
//   are handled in order; records with the same key are never handled concurrently (like one Kafka
//   partition), also across concurrent publish() calls. Every subscription with a distinct groupId gets
//   every record (like Kafka consumer groups); subscriptions sharing a groupId share the records.
// - Values travel JSON-encoded, as on Kafka: handlers get a JSON copy of what was published (Dates become
//   strings, undefined fields disappear), and a value that cannot be JSON-encoded fails publish().
// - A transient handler error is retried a few times with a short backoff, then publish() rejects with
//   it, so the webhook answers 5xx and the provider delivers again (handlers are idempotent).
// - PoisonRecordError: the record goes to the in-memory dead-letter list `deadLetters` (the
//   `<topic>.dlq` of this mode; the newest `maxDeadLetters` are kept) and `onDeadLetter` is called;
//   publish() succeeds, the record is not retried.
// - Publishing to a topic nobody subscribes to yet queues the records in memory; the first subscription
//   to that topic receives them, in order, and retries a failing one (capped backoff) until it succeeds.
// - A subscription with a batch handler gets every record as a batch of one (records are handed over as they
//   are published, like the per-record handler): `ok` = handled, `poison` = dead letter, `retry` = a
//   transient failure as above.
//
// Durability: at-least-once only while this process lives. Nothing is written anywhere: records queued
// for a missing subscriber, or being retried, are lost if the process dies. Use the Kafka transport
// (KAFKA_BROKERS) where that matters.
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  type BatchHandler,
  dlqTopic,
  PoisonRecordError,
  type IncomingRecord,
  type OutgoingRecord,
  type RecordHandler,
  type RecordTransport,
  type SubscribeOptions,
  type Subscription,
} from '../../ports/transport';

export interface InProcessTransportOptions {
  /** retries of a transient failure inside publish() before it rejects (default 3) */
  retries?: number;
  /** first retry delay, doubled on each retry (default 20 ms) */
  retryDelayMs?: number;
  /** cap of the retry delay for queued records delivered to a late subscriber (default 5 s) */
  maxRetryDelayMs?: number;
  /** dead letters kept in memory (default 10,000; oldest dropped first) */
  maxDeadLetters?: number;
}

export interface DeadLetter {
  /** the dead-letter topic, `<topic>.dlq` */
  topic: string;
  reason: string;
  record: IncomingRecord;
  at: Date;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const isPoison = (err: unknown): err is PoisonRecordError =>
  err instanceof PoisonRecordError || (err instanceof Error && err.name === 'PoisonRecordError');

/** A batch handler seen through the per-record contract: one record per call. */
function oneRecordAtATime(batchHandler: BatchHandler): RecordHandler {
  return async (record) => {
    const outcomes = await batchHandler([record]);
    const outcome = Array.isArray(outcomes) && outcomes.length === 1 ? outcomes[0] : undefined;
    if (!outcome) throw new Error(`batch handler answered ${Array.isArray(outcomes) ? outcomes.length : 'no'} outcomes for 1 record`);
    if (outcome.kind === 'poison') throw new PoisonRecordError(outcome.reason);
    if (outcome.kind === 'retry') throw outcome.error ?? new Error('batch handler asked for a retry');
  };
}

class SubscriptionStoppedError extends Error {
  constructor() {
    super('the subscription stopped before the record was handled');
    this.name = 'SubscriptionStoppedError';
  }
}

class InProcessSubscription implements Subscription {
  active = true;
  private readonly inFlight = new Set<Promise<unknown>>();
  private stopping: Promise<void> | null = null;

  constructor(
    readonly topic: string,
    readonly handler: RecordHandler,
    readonly options: SubscribeOptions,
    private readonly onStop: (sub: InProcessSubscription) => void,
  ) {}

  /** Runs the handler, tracked so that stop() can wait for it. */
  run(record: IncomingRecord): Promise<void> {
    if (!this.active) return Promise.reject(new SubscriptionStoppedError());
    const p = this.handler(record);
    this.inFlight.add(p);
    return p.finally(() => this.inFlight.delete(p));
  }

  stop(): Promise<void> {
    if (!this.stopping) {
      this.active = false;
      this.onStop(this);
      this.stopping = Promise.allSettled([...this.inFlight]).then(() => undefined);
    }
    return this.stopping;
  }
}

export class InProcessTransport implements RecordTransport {
  readonly kind = 'in-process' as const;
  /** records refused by a handler with PoisonRecordError (this mode's `<topic>.dlq`), oldest first */
  readonly deadLetters: DeadLetter[] = [];

  private readonly retries: number;
  private readonly retryDelayMs: number;
  private readonly maxRetryDelayMs: number;
  private readonly maxDeadLetters: number;
  private readonly subscriptions = new Map<string, InProcessSubscription[]>();
  /** records published while nobody subscribed, per topic */
  private readonly pending = new Map<string, IncomingRecord[]>();
  private readonly offsets = new Map<string, bigint>();
  /** per (topic, group, key) tail of the records being handled: same-key records run one at a time */
  private readonly chains = new Map<string, Promise<void>>();
  private readonly heldChains = new AsyncLocalStorage<ReadonlySet<string>>();
  private readonly drains = new Set<Promise<void>>();
  private closed = false;

  constructor(options: InProcessTransportOptions = {}) {
    this.retries = options.retries ?? 3;
    this.retryDelayMs = options.retryDelayMs ?? 20;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 5_000;
    this.maxDeadLetters = options.maxDeadLetters ?? 10_000;
  }

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    if (this.closed) throw new Error('InProcessTransport is closed');
    // encode everything first: a value that cannot be encoded fails the whole call before any delivery
    const incoming = records.map((r) => this.toIncoming(topic, r));
    for (const record of incoming) {
      const targets = this.targets(topic);
      if (targets.length === 0) {
        const queue = this.pending.get(topic) ?? [];
        queue.push(record);
        this.pending.set(topic, queue);
        continue;
      }
      await Promise.all(targets.map((sub) => this.deliver(sub, record, 'publish')));
    }
  }

  async subscribe(topic: string, handler: RecordHandler, options: SubscribeOptions): Promise<Subscription> {
    if (this.closed) throw new Error('InProcessTransport is closed');
    const perRecord = options.batchHandler ? oneRecordAtATime(options.batchHandler) : handler;
    const sub = new InProcessSubscription(topic, perRecord, options, (s) => {
      const list = (this.subscriptions.get(topic) ?? []).filter((x) => x !== s);
      if (list.length > 0) this.subscriptions.set(topic, list);
      else this.subscriptions.delete(topic);
    });
    this.subscriptions.set(topic, [...(this.subscriptions.get(topic) ?? []), sub]);

    const queued = this.pending.get(topic);
    if (queued && queued.length > 0) {
      this.pending.delete(topic);
      // Chained per key right now, so records published from here on are handled after them; records
      // without a key are handled one after the other.
      const drain = Promise.allSettled(
        queued.map((record) =>
          this.deliver(sub, record, 'drain').catch((err) => {
            // the subscription stopped before this record was handled: keep it for the next one
            if (!(err instanceof SubscriptionStoppedError)) throw err;
            const again = this.pending.get(topic) ?? [];
            again.push(record);
            again.sort((a, b) => (BigInt(a.offset!) < BigInt(b.offset!) ? -1 : 1));
            this.pending.set(topic, again);
          }),
        ),
      ).then(() => undefined);
      this.drains.add(drain);
      void drain.finally(() => this.drains.delete(drain));
    }
    return sub;
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const subs = [...this.subscriptions.values()].flat();
    await Promise.all(subs.map((s) => s.stop()));
    await Promise.allSettled([...this.drains]);
  }

  /** The one subscription per consumer group that gets a record of `topic`. */
  private targets(topic: string): InProcessSubscription[] {
    const byGroup = new Map<string, InProcessSubscription>();
    for (const sub of this.subscriptions.get(topic) ?? []) {
      if (sub.active && !byGroup.has(sub.options.groupId)) byGroup.set(sub.options.groupId, sub);
    }
    return [...byGroup.values()];
  }

  private toIncoming(topic: string, r: OutgoingRecord): IncomingRecord {
    const encoded = JSON.stringify(r.value === undefined ? null : r.value);
    const offset = this.offsets.get(topic) ?? 0n;
    this.offsets.set(topic, offset + 1n);
    return {
      topic,
      key: r.key,
      value: JSON.parse(encoded) as unknown,
      partition: 0,
      offset: offset.toString(),
      headers: { ...(r.headers ?? {}) },
    };
  }

  /**
   * Hands one record to one subscription, after the earlier records with the same key.
   * 'publish': a transient failure is retried `retries` times, then thrown.
   * 'drain': retried with capped backoff until it succeeds or the subscription stops.
   */
  private deliver(sub: InProcessSubscription, record: IncomingRecord, mode: 'publish' | 'drain'): Promise<void> {
    const attemptAll = async () => {
      for (let attempt = 1; ; attempt++) {
        if (!sub.active) throw new SubscriptionStoppedError();
        try {
          await sub.run({ ...record, headers: { ...record.headers } });
          return;
        } catch (err) {
          if (err instanceof SubscriptionStoppedError) throw err;
          if (isPoison(err)) {
            this.deadLetter(sub, record, err.reason || err.message);
            return;
          }
          if (mode === 'publish' && attempt > this.retries) throw err;
          await sleep(Math.min(this.maxRetryDelayMs, this.retryDelayMs * 2 ** (attempt - 1)));
        }
      }
    };
    const chain = record.key ?? (mode === 'drain' ? '\u0001queued-without-key' : null);
    if (chain === null) return attemptAll();
    return this.serialize(`${record.topic}\u0000${sub.options.groupId}\u0000${chain}`, attemptAll);
  }

  private serialize(chainKey: string, fn: () => Promise<void>): Promise<void> {
    const held = this.heldChains.getStore();
    // A handler publishing a record with its own key to its own topic: run it now (waiting for the
    // chain would wait for that very handler).
    if (held?.has(chainKey)) return fn();
    const withHeld = () => this.heldChains.run(new Set([...(held ?? []), chainKey]), fn);
    const previous = this.chains.get(chainKey);
    const run = previous ? previous.then(withHeld) : withHeld();
    const tail = run.catch(() => {});
    this.chains.set(chainKey, tail);
    void tail.then(() => {
      if (this.chains.get(chainKey) === tail) this.chains.delete(chainKey);
    });
    return run;
  }

  private deadLetter(sub: InProcessSubscription, record: IncomingRecord, reason: string): void {
    this.deadLetters.push({ topic: dlqTopic(record.topic), reason, record, at: new Date() });
    if (this.deadLetters.length > this.maxDeadLetters) {
      this.deadLetters.splice(0, this.deadLetters.length - this.maxDeadLetters);
    }
    try {
      sub.options.onDeadLetter?.(record, reason);
    } catch {
      // a metrics callback must not turn a dead letter into a failure
    }
  }
}
