// Kafka adapter of the record transport (production): kafkajs against any Kafka >= 2.x (tested on Apache
// Kafka 3.9, KRaft). See src/ports/transport.ts for the contract.
//
// Publishing: one idempotent producer (acks=-1, one request in flight), so `publish` resolves only once
// every record is durably written; concurrent publish() calls are coalesced into one produce request
// (group commit), which keeps the webhook path fast under load without giving up the ack. A produce request
// carries at most `maxRequestBytes` (default 900 KB, under the broker's default message.max.bytes of ~1 MB):
// the queue is sent in as many requests as needed, a publish larger than that is split over several requests
// (it resolves once all of them are acknowledged, rejects if one fails), a record larger than that fails only
// its own publish (RecordTooLargeError naming every such record of it), and a request the broker still refuses
// as too large is retried publish by publish so only the offending one fails.
//
// Consuming: kafka-subscription.ts (the consumer loop: batches, offsets, retries, dead letters) and
// supervised-subscription.ts (restarts). Options and logging: transport-options.ts; conversions between
// kafkajs messages and records: kafka-records.ts. kafkajs's idle timer loop is mended by request-queue-idle-fix.ts.
import {
  Kafka,
  Partitioners,
  logLevel as KafkaLogLevel,
  type Admin,
  type KafkaMessage,
  type Message,
  type Producer,
} from 'kafkajs';
import {
  deadLetterHeaders,
  dlqTopic,
  type OutgoingRecord,
  RecordTooLargeError,
  type RecordHandler,
  type RecordTransport,
  type SubscribeOptions,
  type Subscription,
} from '../../ports/transport';
import { encodeValue, headersToStrings } from './kafka-records';
import { KafkaSubscription } from './kafka-subscription';
import { SupervisedSubscription } from './supervised-subscription';
import { installRequestQueueIdleFix, PATCHED_KAFKAJS_VERSION } from './request-queue-idle-fix';
import { kafkajsLogCreator, type KafkaTransportOptions, type TransportLogger } from './transport-options';

export type { KafkaTransportOptions, TransportLogger } from './transport-options';
export { isPoison } from './kafka-subscription';
export { RecordTooLargeError } from '../../ports/transport';

/**
 * Default cap of one produce request, in (estimated) bytes. The broker refuses a partition's record batch larger
 * than its message.max.bytes (default 1,048,588) and with it the whole request; 900 KB leaves room for the
 * request's and batches' framing. Raise it (KafkaTransport option `maxRequestBytes`) only together with the
 * broker's and topics' limits.
 */
export const DEFAULT_MAX_REQUEST_BYTES = 900 * 1024;
/** Estimated framing of one record in a v2 record batch (length, attributes, deltas, key/value lengths), generously. */
const RECORD_OVERHEAD_BYTES = 40;
/** Estimated framing of one record header (key and value lengths). */
const HEADER_OVERHEAD_BYTES = 10;
/** Estimated framing of one request: request header, topic and partition entries, record batch headers. */
const REQUEST_OVERHEAD_BYTES = 4 * 1024;

/** Options of the Kafka transport beyond transport-options.ts. */
export interface KafkaTransportLimits {
  /** upper bound of one produce request in bytes (estimated; default DEFAULT_MAX_REQUEST_BYTES) */
  maxRequestBytes?: number;
}

interface PendingSend {
  topic: string;
  messages: Message[];
  /** estimated size of each message */
  sizes: number[];
  /** index of the first message not yet handed to the producer */
  next: number;
  settled: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** One caller's messages in one produce request (a caller larger than a request has several parts). */
interface Part {
  item: PendingSend;
  messages: Message[];
  /** the caller's last part: its ack resolves the caller */
  last: boolean;
}

const byteLength = (v: Buffer | string | null | undefined): number =>
  v == null ? 0 : typeof v === 'string' ? Buffer.byteLength(v) : v.length;

/** Estimated size of a message in a produce request (no compression). */
export function estimateMessageBytes(m: Message): number {
  let bytes = RECORD_OVERHEAD_BYTES + byteLength(m.key) + byteLength(m.value);
  for (const [k, v] of Object.entries(m.headers ?? {})) {
    for (const one of Array.isArray(v) ? v : [v]) bytes += HEADER_OVERHEAD_BYTES + Buffer.byteLength(k) + byteLength(one);
  }
  return bytes;
}

/** Longest record key a dead letter without its value keeps. */
const DLQ_KEY_MAX = 1_024;

const TOO_LARGE_TYPES = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE']);

/** Whether kafkajs's error (possibly wrapped: cause, originalError, errors[]) is the broker refusing a too large batch. */
function isTooLarge(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 5) return false;
  const e = err as { type?: unknown; cause?: unknown; originalError?: unknown; errors?: unknown };
  if (typeof e.type === 'string' && TOO_LARGE_TYPES.has(e.type)) return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => isTooLarge(x, depth + 1))) return true;
  return (e.cause !== err && isTooLarge(e.cause, depth + 1)) || (e.originalError !== err && isTooLarge(e.originalError, depth + 1));
}

export class KafkaTransport implements RecordTransport {
  readonly kind = 'kafka' as const;

  private readonly kafka: Kafka;
  private readonly logger: TransportLogger | undefined;
  private readonly opts: Required<Omit<KafkaTransportOptions, 'logger' | 'numPartitions' | 'heartbeatIntervalMs'>> &
    Pick<KafkaTransportOptions, 'numPartitions' | 'heartbeatIntervalMs'>;
  private producer: Producer | null = null;
  private producerReady: Promise<Producer> | null = null;
  private admin: Admin | null = null;
  private adminReady: Promise<Admin> | null = null;
  private readonly knownTopics = new Set<string>();
  private readonly subscriptions = new Set<KafkaSubscription>();
  private readonly supervised = new Set<SupervisedSubscription>();
  private readonly maxRequestBytes: number;
  private queue: PendingSend[] = [];
  private flushing: Promise<void> | null = null;
  /** close() has begun: no new subscriptions, consumers being started stop themselves */
  private closing = false;
  private closingDone: Promise<void> | null = null;
  private closed = false;

  constructor(options: KafkaTransportOptions & KafkaTransportLimits) {
    this.logger = options.logger;
    this.maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
    if (installRequestQueueIdleFix() === 'other-version') {
      this.logger?.warn({ expected: PATCHED_KAFKAJS_VERSION }, 'kafkajs is not the version its idle-loop fix was written for: the fix is not installed');
    }
    this.opts = {
      brokers: options.brokers,
      clientId: options.clientId,
      numPartitions: options.numPartitions,
      partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 3,
      sessionTimeoutMs: options.sessionTimeoutMs ?? 30_000,
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      maxWaitTimeMs: options.maxWaitTimeMs ?? 500,
      commitIntervalMs: options.commitIntervalMs ?? 1_000,
      retryInitialMs: options.retryInitialMs ?? 50,
      retryMaxMs: options.retryMaxMs ?? 5_000,
      publishTimeoutMs: options.publishTimeoutMs ?? 10_000,
    };
    this.kafka = new Kafka({
      clientId: options.clientId,
      brokers: options.brokers,
      logLevel: KafkaLogLevel.WARN,
      ...(options.logger ? { logCreator: kafkajsLogCreator(options.logger) } : {}),
      connectionTimeout: 3_000,
      requestTimeout: 30_000,
      retry: { initialRetryTime: 100, maxRetryTime: 5_000, retries: 8 },
    });
  }

  // ---- publishing ----------------------------------------------------------------------------------

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    if (records.length === 0) return;
    await this.ensureTopics([topic]);
    await this.send(
      topic,
      records.map((r) => ({
        key: r.key,
        value: encodeValue(r.value),
        ...(r.headers ? { headers: r.headers } : {}),
      })),
    );
  }

  /** Enqueues messages for the producer; resolves once the broker acknowledged them (acks=-1). */
  private send(topic: string, messages: Message[]): Promise<void> {
    if (this.closed) return Promise.reject(new Error('KafkaTransport is closed'));
    if (messages.length === 0) return Promise.resolve();
    const sizes = messages.map(estimateMessageBytes);
    const room = this.maxRequestBytes - REQUEST_OVERHEAD_BYTES;
    const tooLarge = sizes.flatMap((n, i) => (n > room ? [i] : []));
    if (tooLarge.length > 0) {
      const first = tooLarge[0];
      return Promise.reject(
        new RecordTooLargeError(
          `Kafka record ${first} of the publish to ${topic} is about ${sizes[first]} bytes: larger than one produce request may carry ` +
            `(${this.maxRequestBytes} bytes, below the broker's message.max.bytes); nothing of this publish was written`,
          tooLarge,
        ),
      );
    }
    let item!: PendingSend;
    const acked = new Promise<void>((resolve, reject) => {
      item = {
        topic,
        messages,
        sizes,
        next: 0,
        settled: false,
        resolve: () => {
          item.settled = true;
          resolve();
        },
        reject: (err) => {
          item.settled = true;
          reject(err);
        },
      };
      this.queue.push(item);
    });
    if (!this.flushing) this.flushing = this.flush().finally(() => (this.flushing = null));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // what was not handed to the producer yet (e.g. the cluster is down) is dropped; the caller is told it failed
        this.queue = this.queue.filter((q) => q !== item);
        item.reject(new Error(`Kafka did not acknowledge the publish to ${topic} within ${this.opts.publishTimeoutMs} ms`));
      }, this.opts.publishTimeoutMs);
    });
    return Promise.race([acked, timeout]).finally(() => clearTimeout(timer));
  }

  /**
   * Takes the next produce request off the head of the queue: whole callers while they fit in maxRequestBytes; a
   * caller that does not fit in what is left starts the next request, and one larger than a whole request is split.
   */
  private takeRequest(): Part[] {
    const parts: Part[] = [];
    let bytes = REQUEST_OVERHEAD_BYTES;
    while (this.queue.length > 0) {
      const item = this.queue[0];
      if (item.settled) {
        this.queue.shift();
        continue;
      }
      let rest = 0;
      for (let i = item.next; i < item.sizes.length; i++) rest += item.sizes[i];
      // keep a caller's records together: if it fits in a request of its own, it waits for the next one
      if (parts.length > 0 && bytes + rest > this.maxRequestBytes && REQUEST_OVERHEAD_BYTES + rest <= this.maxRequestBytes) break;
      let end = item.next;
      while (end < item.sizes.length && bytes + item.sizes[end] <= this.maxRequestBytes) bytes += item.sizes[end++];
      if (end === item.next) break; // nothing of it fits in what is left: the next request
      parts.push({ item, messages: item.messages.slice(item.next, end), last: end === item.messages.length });
      item.next = end;
      if (end < item.messages.length) break; // the request is full
      this.queue.shift();
    }
    return parts;
  }

  private async sendParts(parts: Part[]): Promise<void> {
    const byTopic = new Map<string, Message[]>();
    for (const part of parts) {
      const list = byTopic.get(part.item.topic) ?? [];
      for (const m of part.messages) list.push(m);
      byTopic.set(part.item.topic, list);
    }
    const producer = await this.getProducer();
    await producer.sendBatch({
      acks: -1,
      topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
    });
  }

  /** A caller failed: it is told, and what is left of it is not sent. */
  private fail(item: PendingSend, err: unknown): void {
    item.reject(err);
    this.queue = this.queue.filter((q) => q !== item);
  }

  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const parts = this.takeRequest().filter((p) => !p.item.settled);
      if (parts.length === 0) continue;
      try {
        await this.sendParts(parts);
        for (const part of parts) if (part.last) part.item.resolve();
      } catch (err) {
        const callers = [...new Set(parts.map((p) => p.item))];
        if (!isTooLarge(err)) {
          for (const item of callers) this.fail(item, err);
          continue;
        }
        if (callers.length === 1) {
          this.fail(callers[0], this.tooLargeForBroker(callers[0], err));
          continue;
        }
        // the broker's (or the topic's) limit is below maxRequestBytes: each caller alone, so only the offending one fails
        this.logger?.warn({ callers: callers.length, maxRequestBytes: this.maxRequestBytes }, 'Kafka refused a produce request as too large; sending its publishes one by one');
        for (const item of callers) {
          const own = parts.filter((p) => p.item === item);
          if (item.settled) continue;
          try {
            await this.sendParts(own);
            if (own.some((p) => p.last)) item.resolve();
          } catch (err2) {
            this.fail(item, isTooLarge(err2) ? this.tooLargeForBroker(item, err2) : err2);
          }
        }
      }
    }
  }

  private tooLargeForBroker(item: PendingSend, cause: unknown): Error {
    return new RecordTooLargeError(
      `Kafka refused the publish to ${item.topic} (${item.messages.length} records) as too large: the broker's or topic's ` +
        `max.message.bytes is below this transport's maxRequestBytes (${this.maxRequestBytes})`,
      [],
      { cause },
    );
  }

  private getProducer(): Promise<Producer> {
    if (!this.producerReady) {
      const producer = this.kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        // the idempotent producer retries until the broker answers; publish() has its own timeout
        retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 100, maxRetryTime: 5_000 },
        allowAutoTopicCreation: false,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      this.producerReady = producer.connect().then(
        () => (this.producer = producer),
        (err) => {
          this.producerReady = null;
          throw err;
        },
      );
    }
    return this.producerReady;
  }

  // ---- admin ---------------------------------------------------------------------------------------

  private getAdmin(): Promise<Admin> {
    if (!this.adminReady) {
      const admin = this.kafka.admin();
      this.adminReady = admin.connect().then(
        () => (this.admin = admin),
        (err) => {
          this.adminReady = null;
          throw err;
        },
      );
    }
    return this.adminReady;
  }

  /** Creates the topics that do not exist yet (already existing is fine). */
  async ensureTopics(topics: string[]): Promise<void> {
    const missing = [...new Set(topics)].filter((t) => !this.knownTopics.has(t));
    if (missing.length === 0) return;
    const admin = await this.getAdmin();
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((topic) => ({
          topic,
          ...(this.opts.numPartitions ? { numPartitions: this.opts.numPartitions } : {}),
        })),
      });
    } catch (err) {
      // e.g. no permission to create topics: fine as long as they exist
      try {
        await admin.fetchTopicMetadata({ topics: missing });
      } catch {
        throw err;
      }
    }
    for (const t of missing) this.knownTopics.add(t);
  }

  async ping(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.getAdmin().then((admin) => admin.describeCluster()),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('Kafka ping timed out')), 5_000);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  // ---- consuming -----------------------------------------------------------------------------------

  /**
   * Subscribes under supervision: if the broker cannot be reached (at start, or a consumer crash that kafkajs
   * will not restart by itself), the consumer is recreated with backoff instead of failing the process. The
   * subscription resolves at once; records flow as soon as a consumer is up.
   */
  async subscribe(topic: string, handler: RecordHandler, options: SubscribeOptions): Promise<Subscription> {
    if (this.closing) throw new Error('KafkaTransport is closed');
    const supervised = new SupervisedSubscription(
      (onFatalCrash) => this.startConsumer(topic, handler, options, onFatalCrash),
      (err, attempt, delayMs) => this.logger?.warn({ topic, groupId: options.groupId, err, attempt, delayMs }, 'Kafka consumer not running; retrying'),
    );
    this.supervised.add(supervised);
    supervised.onStopped = () => this.supervised.delete(supervised);
    await supervised.start();
    return supervised;
  }

  private async startConsumer(topic: string, handler: RecordHandler, options: SubscribeOptions, onFatalCrash: () => void): Promise<KafkaSubscription> {
    const closed = () => new Error('KafkaTransport is closed');
    if (this.closing) throw closed();
    await this.ensureTopics([topic, dlqTopic(topic)]);
    if (this.closing) throw closed(); // close() began meanwhile: start nothing
    const sessionTimeout = this.opts.sessionTimeoutMs;
    const heartbeatIntervalMs = this.opts.heartbeatIntervalMs ?? Math.min(3_000, Math.floor(sessionTimeout / 10));
    const consumer = this.kafka.consumer({
      groupId: options.groupId,
      sessionTimeout,
      heartbeatInterval: heartbeatIntervalMs,
      maxWaitTimeInMs: this.opts.maxWaitTimeMs,
      allowAutoTopicCreation: false,
    });
    const sub = new KafkaSubscription(this, consumer, topic, handler, options, { ...this.opts, heartbeatIntervalMs }, this.logger);
    sub.onFatalCrash = onFatalCrash;
    this.subscriptions.add(sub);
    sub.onStopped = () => this.subscriptions.delete(sub);
    try {
      await sub.start();
    } catch (err) {
      this.subscriptions.delete(sub);
      await consumer.disconnect().catch(() => {});
      throw err;
    }
    if (this.closing) {
      await sub.stop().catch(() => undefined);
      throw closed();
    }
    return sub;
  }

  /**
   * @internal used by subscriptions to dead-letter a record (resolves once acknowledged). The reason is shortened
   * to DLQ_REASON_MAX characters by deadLetterHeaders (it may quote the record). A dead letter the transport or the broker refuses as too
   * large (a record near the broker's limit, which a request of this transport cannot carry) is written without the
   * value, its size in `x-dlq-value-omitted` (the record stays at its original coordinates until retention): a
   * poison record must never stall its partition.
   */
  async deadLetter(message: KafkaMessage, source: { topic: string; partition: number }, reason: string): Promise<void> {
    const coordinates = { topic: source.topic, partition: source.partition, offset: message.offset };
    const headers = deadLetterHeaders(headersToStrings(message.headers), reason, coordinates);
    try {
      await this.send(dlqTopic(source.topic), [{ key: message.key, value: message.value, headers }]);
    } catch (err) {
      if (!(err instanceof RecordTooLargeError)) throw err;
      const key = message.key && message.key.length <= DLQ_KEY_MAX ? message.key : null;
      const omitted = { 'x-dlq-value-omitted': String(message.value?.length ?? 0) };
      this.logger?.warn({ ...coordinates, bytes: message.value?.length ?? 0 }, 'dead letter too large for Kafka: written without the value');
      await this.send(dlqTopic(source.topic), [{ key, value: null, headers: deadLetterHeaders(omitted, reason, coordinates) }]);
    }
  }

  close(): Promise<void> {
    if (!this.closingDone) {
      this.closing = true;
      this.closingDone = this.doClose();
    }
    return this.closingDone;
  }

  private async doClose(): Promise<void> {
    // a supervised subscription whose consumer is still starting waits for that start and stops what it created
    await Promise.allSettled([...this.supervised].map((s) => s.stop()));
    await Promise.allSettled([...this.subscriptions].map((s) => s.stop()));
    this.closed = true;
    // let acknowledged-soon publishes finish, but never hang on a cluster that is gone
    if (this.flushing) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.flushing.catch(() => {}),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, 5_000).unref())),
      ]);
      clearTimeout(timer);
    }
    const producer = this.producer;
    const admin = this.admin;
    this.producer = this.admin = null;
    this.producerReady = this.adminReady = null;
    await Promise.allSettled([producer?.disconnect(), admin?.disconnect()]);
  }
}
