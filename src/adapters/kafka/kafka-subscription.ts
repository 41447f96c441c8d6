// The consumer loop of one Kafka subscription: batches fetched per partition, records handled in order, offsets
// committed, transient failures retried and poison records sent to the dead-letter topic. Over 400 lines: it is
// one class whose three batch strategies share its retry state, stop flag and dead-letter path.
//
// Consuming (at-least-once, per-partition order):
// - one kafkajs consumer per subscription, autoCommit off, fromBeginning for a new group;
// - eachBatch with partitionsConsumedConcurrently: partitions run in parallel, records of one partition
//   strictly one after the other;
// - a record is handled, then its offset resolved; offsets (next offset = last handled + 1) are committed
//   at the end of every batch, every `commitIntervalMs` inside long batches, before any backoff and on
//   stop. A crash therefore re-delivers at most the records handled since the last commit: handlers must
//   be idempotent, which at-least-once delivery requires anyway;
// - PoisonRecordError (or a value that is not JSON) => the original record (same key, bytes and
//   headers) goes to `<topic>.dlq` with x-dlq-reason / x-original-topic / x-original-partition /
//   x-original-offset, once that write is acknowledged the offset moves past it: a poison record never
//   stalls its partition;
// - any other error => the same record is retried with capped exponential backoff and nothing after it
//   on that partition is handled or committed until it succeeds. Short delays are waited in place
//   (heartbeating); longer ones pause only that partition so the consumer's other partitions go on.
//   A heartbeat that fails while waiting (the group is rebalancing, or dropped this member) ends the batch
//   in every strategy: what is done is committed (best effort) and the error goes back to kafkajs, which
//   rejoins; the unfinished records are fetched again by whoever owns the partition then.
// - while a handler runs, heartbeats go on in the background (heartbeats.ts): a handler slower than the session
//   timeout keeps its member, so its partition is not handed to another member that would handle the same
//   records at the same time (and be overtaken by the slow one's stale result).
// - with a batch handler (SubscribeOptions.batchHandler) the partition's fetched batch is handed over in slices
//   of up to `maxBatchRecords`, one call per slice; the handler answers an outcome per record. Poison records go
//   to the DLQ as above; the `retry` ones are handed again, alone, after a backoff waited in place (heartbeating),
//   until they are done; a throwing handler retries the whole slice. Offsets move past a slice only once every
//   record of it is done, and up to the first unfinished record before any backoff and on stop.
import type { Consumer, EachBatchPayload, KafkaMessage } from 'kafkajs';
import {
  type BatchHandler,
  PoisonRecordError,
  type IncomingRecord,
  type RecordHandler,
  shortenReason,
  type SubscribeOptions,
  type Subscription,
} from '../../ports/transport';
import { heartbeats } from './heartbeats';
import { rawRecord } from './kafka-records';
import type { TransportLogger } from './transport-options';

/** What a subscription needs of its transport: KafkaTransport.deadLetter (resolves once acknowledged). */
export interface DeadLetterWriter {
  deadLetter(message: KafkaMessage, source: { topic: string; partition: number }, reason: string): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export const isPoison = (err: unknown): err is PoisonRecordError =>
  err instanceof PoisonRecordError || (err instanceof Error && err.name === 'PoisonRecordError');

const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Per-partition memory of the record being retried. */
interface RetryState {
  offset: string;
  attempts: number;
  /** the handler already refused it: only the dead-letter write is being retried */
  poisonReason?: string;
}

type Outcome = { kind: 'done' } | { kind: 'retry'; error: unknown };

/** A record of a batch-handler slice that is not done yet. */
interface SliceRecord {
  message: KafkaMessage;
  /** the handler (or the JSON parse) refused it: only the dead-letter write is left to do */
  poisonReason?: string;
  /** the last transient error, for the log */
  error?: unknown;
}

const DEFAULT_MAX_BATCH_RECORDS = 500;

export class KafkaSubscription implements Subscription {
  onStopped: () => void = () => {};
  onFatalCrash: () => void = () => {};
  private stopping = false;
  private stopped: Promise<void> | null = null;
  private readonly retries = new Map<string, RetryState>();
  private readonly resumeTimers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly transport: DeadLetterWriter,
    private readonly consumer: Consumer,
    private readonly topic: string,
    private readonly handler: RecordHandler,
    private readonly options: SubscribeOptions,
    private readonly opts: {
      commitIntervalMs: number;
      retryInitialMs: number;
      retryMaxMs: number;
      partitionsConsumedConcurrently: number;
      /** how often a handler that is running is heartbeated for (kafkajs sends one per heartbeat interval at most) */
      heartbeatIntervalMs: number;
    },
    private readonly logger: TransportLogger | undefined,
  ) {}

  async start(): Promise<void> {
    const { CRASH } = this.consumer.events;
    this.consumer.on(CRASH, (event) => {
      this.logger?.error(
        { topic: this.topic, groupId: this.options.groupId, err: event.payload.error, restart: event.payload.restart },
        'Kafka consumer crashed',
      );
      if (!event.payload.restart && !this.stopping) this.onFatalCrash();
    });
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: [this.topic], fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.opts.partitionsConsumedConcurrently,
      eachBatch: (payload) => this.eachBatch(payload),
    });
  }

  stop(): Promise<void> {
    if (!this.stopped) {
      this.stopping = true;
      for (const t of this.resumeTimers) clearTimeout(t);
      this.resumeTimers.clear();
      // disconnect() stops fetching, waits for the running batches (each finishes its in-flight handler
      // and commits what succeeded), leaves the group and closes the connections.
      this.stopped = this.consumer.disconnect().finally(() => this.onStopped());
    }
    return this.stopped;
  }

  private backoff(attempts: number): number {
    return Math.min(this.opts.retryMaxMs, this.opts.retryInitialMs * 2 ** Math.max(0, attempts - 1));
  }

  private async eachBatch(payload: EachBatchPayload): Promise<void> {
    if (this.options.batchHandler) return this.eachBatchWithBatchHandler(payload, this.options.batchHandler);
    if ((this.options.keyedConcurrency ?? 1) > 1) return this.eachBatchByKey(payload, this.options.keyedConcurrency!);
    const { batch, resolveOffset, commitOffsetsIfNecessary, isRunning, isStale, pause } = payload;
    const { topic, partition } = batch;
    const rebalance = heartbeats(payload.heartbeat, this.backgroundBeatMs());
    const active = () => !rebalance.lost() && !this.stopping && isRunning() && !isStale();
    let lastHandled: string | null = null;
    let lastCommitAt = Date.now();

    const commit = async () => {
      if (lastHandled === null) return;
      const offset = (BigInt(lastHandled) + 1n).toString();
      await commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition, offset }] }] });
      lastHandled = null;
      lastCommitAt = Date.now();
    };

    try {
      for (const message of batch.messages) {
        if (!active()) break;
        let outcome = await rebalance.during(() => this.process(topic, partition, message));
        // short delays: wait in place; long ones: pause this partition only and come back to the record
        while (outcome.kind === 'retry') {
          const state = this.retries.get(String(partition))!;
          const delay = this.backoff(state.attempts);
          this.logger?.warn(
            { topic, partition, offset: message.offset, attempt: state.attempts, delayMs: delay, err: outcome.error },
            'record handler failed; retrying',
          );
          await commit();
          if (delay >= 1_000) {
            const resume = pause();
            const timer = setTimeout(() => {
              this.resumeTimers.delete(timer);
              resume();
            }, delay);
            this.resumeTimers.add(timer);
            return;
          }
          const until = Date.now() + delay;
          while (Date.now() < until && active()) {
            await sleep(Math.min(100, until - Date.now()));
            await rebalance.beat();
          }
          if (!active()) return;
          outcome = await rebalance.during(() => this.process(topic, partition, message));
        }
        resolveOffset(message.offset);
        lastHandled = message.offset;
        await rebalance.beat();
        if (active() && Date.now() - lastCommitAt >= this.opts.commitIntervalMs) await commit();
      }
    } finally {
      // at the end of the batch; when stopping or rebalancing best effort (the group may have moved on)
      if (active()) await commit();
      else await commit().catch(() => undefined);
      // on every way out (the returns above too): kafkajs must learn of a failed heartbeat to rejoin
      rebalance.rethrow();
    }
  }

  /** How often a running handler's heartbeat is offered to kafkajs (which sends one per heartbeat interval at most). */
  private backgroundBeatMs(): number {
    return Math.max(50, Math.floor(this.opts.heartbeatIntervalMs / 2));
  }

  /**
   * Keyed concurrency: the batch is taken in windows of up to `width` records; within a window, records with
   * different keys are handled concurrently and records with the same key in offset order. A record that fails
   * transiently is retried in place (with heartbeats) while the others of its window proceed; the offset is
   * resolved and committed only once the whole window is done, so nothing after an unfinished record is
   * committed.
   */
  private async eachBatchByKey(payload: EachBatchPayload, width: number): Promise<void> {
    const { batch, resolveOffset, commitOffsetsIfNecessary, isRunning, isStale } = payload;
    const { topic, partition } = batch;
    const rebalance = heartbeats(payload.heartbeat, this.backgroundBeatMs());
    const active = () => !rebalance.lost() && !this.stopping && isRunning() && !isStale();
    let lastCommitAt = Date.now();
    let uncommitted: string | null = null; // last offset resolved but not committed yet
    for (let start = 0; start < batch.messages.length && active(); start += width) {
      const window = batch.messages.slice(start, start + width);
      const chains = new Map<string, KafkaMessage[]>();
      for (const m of window) {
        const key = m.key?.toString('utf8') ?? `offset:${m.offset}`;
        const chain = chains.get(key);
        if (chain) chain.push(m);
        else chains.set(key, [m]);
      }
      let completed = true;
      await rebalance.during(() => Promise.all(
        [...chains.values()].map(async (chain) => {
          for (const [i, message] of chain.entries()) {
            // the rebalance (a failed background heartbeat) or stop waits for the records in flight, not for the
            // rest of their chains (review 16a): the unfinished window goes to the next owner
            if (i > 0 && !active()) {
              completed = false;
              return;
            }
            const retryKey = `${partition}:${message.offset}`;
            let outcome = await this.process(topic, partition, message, retryKey);
            while (outcome.kind === 'retry') {
              if (!active()) {
                completed = false;
                return;
              }
              const attempts = this.retries.get(retryKey)?.attempts ?? 1;
              const delay = this.backoff(attempts);
              this.logger?.warn({ topic, partition, offset: message.offset, attempt: attempts, delayMs: delay, err: outcome.error }, 'record handler failed; retrying');
              const until = Date.now() + delay;
              while (Date.now() < until && active()) {
                await sleep(Math.min(100, until - Date.now()));
                await rebalance.beat();
              }
              outcome = await this.process(topic, partition, message, retryKey);
            }
          }
        }),
      ));
      if (!completed) break; // stopping or rebalancing: the unfinished window is re-delivered to the next owner
      const last = window[window.length - 1].offset;
      resolveOffset(last);
      uncommitted = last;
      await rebalance.beat();
      if (!rebalance.lost() && (Date.now() - lastCommitAt >= this.opts.commitIntervalMs || start + width >= batch.messages.length)) {
        await commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition, offset: (BigInt(last) + 1n).toString() }] }] });
        lastCommitAt = Date.now();
        uncommitted = null;
      }
    }
    if (uncommitted !== null) {
      // ended early (stopping or rebalancing): best effort, the group may have moved on
      await commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition, offset: (BigInt(uncommitted) + 1n).toString() }] }] }).catch(() => undefined);
    }
    rebalance.rethrow();
  }

  /**
   * Batch handler: the fetched batch in slices of up to `maxBatchRecords`. A slice is handed to the handler; its
   * poison records are dead-lettered, its `retry` records (or all of them when the handler throws) are handed
   * again after a backoff, alone, until every record of the slice is done. Only then does the offset move past the
   * slice (committed at least every `commitIntervalMs`, at the end of the batch, before a backoff up to the first
   * unfinished record, and on stop).
   */
  private async eachBatchWithBatchHandler(payload: EachBatchPayload, handler: BatchHandler): Promise<void> {
    const { batch, resolveOffset, commitOffsetsIfNecessary, isRunning, isStale } = payload;
    const { topic, partition } = batch;
    const max = Math.max(1, this.options.maxBatchRecords ?? DEFAULT_MAX_BATCH_RECORDS);
    const rebalance = heartbeats(payload.heartbeat, this.backgroundBeatMs());
    const active = () => !rebalance.lost() && !this.stopping && isRunning() && !isStale();
    let committed: bigint | null = null; // next offset committed by this call
    let lastCommitAt = Date.now();
    const commit = async (next: bigint) => {
      if (committed !== null && next <= committed) return;
      await commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition, offset: next.toString() }] }] });
      committed = next;
      lastCommitAt = Date.now();
    };
    let done: bigint | null = null; // next offset after the records done so far
    try {
      slices: for (let start = 0; start < batch.messages.length && active(); start += max) {
        const slice = batch.messages.slice(start, start + max);
        let pending: SliceRecord[] = slice.map((message) => ({ message }));
        for (let attempt = 1; ; attempt++) {
          pending = await rebalance.during(() => this.handleSlice(topic, partition, pending, handler));
          if (pending.length === 0) break;
          const delay = this.backoff(attempt);
          this.logger?.warn(
            { topic, partition, offset: pending[0].message.offset, records: pending.length, attempt, delayMs: delay, err: pending[0].error },
            'batch handler: records failed; retrying',
          );
          // everything before the first unfinished record is done
          const firstPending = BigInt(pending[0].message.offset);
          if (firstPending > BigInt(slice[0].offset)) done = firstPending;
          if (done !== null) await commit(done).catch(() => undefined);
          const until = Date.now() + delay;
          while (Date.now() < until && active()) {
            await sleep(Math.min(100, until - Date.now()));
            await rebalance.beat();
          }
          if (!active()) break slices; // the unfinished records are re-delivered to the next owner
        }
        const last = slice[slice.length - 1].offset;
        resolveOffset(last);
        done = BigInt(last) + 1n;
        await rebalance.beat();
        if (Date.now() - lastCommitAt >= this.opts.commitIntervalMs) await commit(done);
      }
    } finally {
      // at the end of the batch, and when stopping or rebalancing (then best effort: the group may have moved on)
      if (done !== null) {
        const end = commit(done);
        if (active()) await end;
        else await end.catch(() => undefined);
      }
    }
    rebalance.rethrow();
  }

  /** One pass over a slice: returns the records still to do (transient failures, unwritten dead letters). */
  private async handleSlice(topic: string, partition: number, pending: SliceRecord[], handler: BatchHandler): Promise<SliceRecord[]> {
    const toHandle: Array<{ entry: SliceRecord; record: IncomingRecord }> = [];
    const toDeadLetter: Array<{ entry: SliceRecord; record: IncomingRecord; reason: string }> = [];
    const left: SliceRecord[] = [];
    for (const entry of pending) {
      const { message } = entry;
      const base = rawRecord(topic, partition, message);
      const raw = base.value as string | null;
      if (entry.poisonReason !== undefined) {
        toDeadLetter.push({ entry, record: base, reason: entry.poisonReason });
        continue;
      }
      if (raw === null) {
        toDeadLetter.push({ entry, record: base, reason: 'value is not JSON: empty value' });
        continue;
      }
      try {
        toHandle.push({ entry, record: { ...base, value: JSON.parse(raw) as unknown } });
      } catch (err) {
        toDeadLetter.push({ entry, record: base, reason: `value is not JSON: ${errorMessage(err)}` });
      }
    }

    if (toHandle.length > 0) {
      let outcomes: Awaited<ReturnType<BatchHandler>> | undefined;
      let failure: unknown;
      try {
        outcomes = await handler(toHandle.map((x) => x.record));
        if (!Array.isArray(outcomes) || outcomes.length !== toHandle.length) {
          failure = new Error(`batch handler answered ${Array.isArray(outcomes) ? outcomes.length : 'no'} outcomes for ${toHandle.length} records`);
          outcomes = undefined;
        }
      } catch (err) {
        failure = err;
      }
      toHandle.forEach(({ entry, record }, i) => {
        const outcome = outcomes?.[i];
        if (!outcome) left.push({ message: entry.message, error: failure });
        else if (outcome.kind === 'retry') left.push({ message: entry.message, error: outcome.error });
        else if (outcome.kind === 'poison') toDeadLetter.push({ entry, record, reason: outcome.reason });
      });
    }

    await Promise.all(
      toDeadLetter.map(async ({ entry, record, reason }) => {
        try {
          await this.transport.deadLetter(entry.message, { topic, partition }, reason);
        } catch (err) {
          left.push({ message: entry.message, poisonReason: reason, error: err });
          return;
        }
        const shown = shortenReason(reason);
        this.logger?.warn({ topic, partition, offset: entry.message.offset, reason: shown }, 'record sent to the dead-letter topic');
        try {
          this.options.onDeadLetter?.(record, shown);
        } catch (err) {
          this.logger?.error({ err }, 'onDeadLetter callback failed');
        }
      }),
    );
    return left.sort((a, b) => (BigInt(a.message.offset) < BigInt(b.message.offset) ? -1 : 1));
  }

  /** Handles one record: done (handled or dead-lettered) or retry (transient failure). */
  private async process(topic: string, partition: number, message: KafkaMessage, retryKey = String(partition)): Promise<Outcome> {
    let state = this.retries.get(retryKey);
    if (state && state.offset !== message.offset) {
      this.retries.delete(retryKey);
      state = undefined;
    }
    const fail = (error: unknown, poisonReason?: string): Outcome => {
      const s = state ?? { offset: message.offset, attempts: 0 };
      s.attempts += 1;
      if (poisonReason !== undefined) s.poisonReason = poisonReason;
      this.retries.set(retryKey, s);
      return { kind: 'retry', error };
    };

    let record = rawRecord(topic, partition, message);
    const raw = record.value as string | null;

    let reason = state?.poisonReason;
    if (reason === undefined) {
      let parsed: { ok: true; value: unknown } | { ok: false; error: string };
      try {
        parsed = raw === null ? { ok: false, error: 'empty value' } : { ok: true, value: JSON.parse(raw) };
      } catch (err) {
        parsed = { ok: false, error: errorMessage(err) };
      }
      if (parsed.ok) {
        record = { ...record, value: parsed.value };
        try {
          await this.handler(record);
          this.retries.delete(retryKey);
          return { kind: 'done' };
        } catch (err) {
          if (!isPoison(err)) return fail(err);
          reason = err.reason || err.message;
        }
      } else {
        reason = `value is not JSON: ${parsed.error}`;
      }
    }

    try {
      await this.transport.deadLetter(message, { topic, partition }, reason);
    } catch (err) {
      return fail(err, reason);
    }
    this.retries.delete(retryKey);
    const shown = shortenReason(reason);
    this.logger?.warn({ topic, partition, offset: message.offset, reason: shown }, 'record sent to the dead-letter topic');
    try {
      this.options.onDeadLetter?.(record, shown);
    } catch (err) {
      this.logger?.error({ err }, 'onDeadLetter callback failed');
    }
    return { kind: 'done' };
  }
}
