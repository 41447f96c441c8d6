// Kafka adapter of the record transport (production): kafkajs against any Kafka >= 2.x (tested on Apache
// Kafka 3.9, KRaft). See src/ports/transport.ts for the contract.
//
// Publishing: one idempotent producer (acks=-1, one request in flight), so `publish` resolves only once
// every record is durably written; concurrent publish() calls are coalesced into one produce request
// (group commit), which keeps the webhook path fast under load without giving up the ack.
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
  dlqTopic,
  type OutgoingRecord,
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

interface PendingSend {
  topic: string;
  messages: Message[];
  resolve: () => void;
  reject: (err: unknown) => void;
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
  private queue: PendingSend[] = [];
  private flushing: Promise<void> | null = null;
  private closed = false;

  constructor(options: KafkaTransportOptions) {
    this.logger = options.logger;
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
    let item!: PendingSend;
    const acked = new Promise<void>((resolve, reject) => {
      item = { topic, messages, resolve, reject };
      this.queue.push(item);
    });
    if (!this.flushing) this.flushing = this.flush().finally(() => (this.flushing = null));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // not handed to the producer yet (e.g. the cluster is down): drop it, the caller is told it failed
        this.queue = this.queue.filter((q) => q !== item);
        reject(new Error(`Kafka did not acknowledge the publish to ${topic} within ${this.opts.publishTimeoutMs} ms`));
      }, this.opts.publishTimeoutMs);
    });
    return Promise.race([acked, timeout]).finally(() => clearTimeout(timer));
  }

  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      const byTopic = new Map<string, Message[]>();
      for (const item of batch) {
        const list = byTopic.get(item.topic) ?? [];
        for (const m of item.messages) list.push(m);
        byTopic.set(item.topic, list);
      }
      try {
        const producer = await this.getProducer();
        await producer.sendBatch({
          acks: -1,
          topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
        });
        for (const item of batch) item.resolve();
      } catch (err) {
        for (const item of batch) item.reject(err);
      }
    }
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
    if (this.closed) throw new Error('KafkaTransport is closed');
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
    if (this.closed) throw new Error('KafkaTransport is closed');
    await this.ensureTopics([topic, dlqTopic(topic)]);
    const sessionTimeout = this.opts.sessionTimeoutMs;
    const consumer = this.kafka.consumer({
      groupId: options.groupId,
      sessionTimeout,
      heartbeatInterval: this.opts.heartbeatIntervalMs ?? Math.min(3_000, Math.floor(sessionTimeout / 10)),
      maxWaitTimeInMs: this.opts.maxWaitTimeMs,
      allowAutoTopicCreation: false,
    });
    const sub = new KafkaSubscription(this, consumer, topic, handler, options, this.opts, this.logger);
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
    return sub;
  }

  /** @internal used by subscriptions to dead-letter a record (resolves once acknowledged) */
  deadLetter(message: KafkaMessage, source: { topic: string; partition: number }, reason: string): Promise<void> {
    return this.send(dlqTopic(source.topic), [
      {
        key: message.key,
        value: message.value,
        headers: {
          ...headersToStrings(message.headers),
          'x-dlq-reason': reason,
          'x-original-topic': source.topic,
          'x-original-partition': String(source.partition),
          'x-original-offset': message.offset,
        },
      },
    ]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
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
