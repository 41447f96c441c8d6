// The broker restarted while a conversation consumer is in the middle of a batch (a REAL Kafka broker of this test's
// own, started from Apache's jars as test/support/kafka.mjs does, so that stopping it disturbs no other suite). The
// record in flight is finished, nothing is lost and nothing is recorded twice once the broker is back.
// Skipped, with the reason, when no broker could be had.
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import type { EventStore } from '../../src/ports/event-store';
import { startConversationConsumer } from '../../src/workers/conversation-consumer';
import { messageRecord, provisionCompany, settle } from '../support/conversation-fixtures';
import { waitFor } from '../support/kafka-names';
import { createTestContext, type TestContext } from '../support/services';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka broker restart test skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const COMPANY = 616;
const TOPIC = 'review15.restart.messages';
const GROUP = 'review15-restart';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

d('a broker restart in the middle of a batch (real broker of its own)', () => {
  let broker: { brokers: string; stop(): Promise<void>; start(): Promise<void>; destroy(): Promise<void> };
  let ctx: TestContext;

  beforeAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { startKafkaBroker } = require('../../scripts/kafka-broker.mjs');
    broker = await startKafkaBroker({ heapMb: 384 });
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    const transport = new KafkaTransport({ brokers: [broker.brokers], clientId: 'switchboard-test-review15', logger: quiet, sessionTimeoutMs: 6_000, maxWaitTimeMs: 100 });
    ctx = await createTestContext({ transport });
    await provisionCompany(ctx.services, { companyId: COMPANY });
    await settle(ctx.services);
  }, 180_000);
  afterAll(async () => {
    await ctx?.close();
    await broker?.destroy();
  }, 120_000);

  it('every chat message recorded once', async () => {
    const kafka = new Kafka({ clientId: 'review15-inspector', brokers: [broker.brokers], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: TOPIC, numPartitions: 2 }, { topic: `${TOPIC}.dlq`, numPartitions: 1 }] });
    const producer = kafka.producer();
    await producer.connect();
    const N = 20;
    const messages = Array.from({ length: N }, (_, n) => messageRecord({ companyId: COMPANY, id: `r15-restart-${n}`, conversationId: `r15-restart-${n % 3}` }));
    // two keys, so both partitions are used
    await producer.send({ topic: TOPIC, messages: messages.map((m, n) => ({ key: `${COMPANY}-${n % 2}`, value: JSON.stringify(m) })) });
    await producer.disconnect();
    await admin.disconnect();

    // appends are held from the 5th on, while the broker goes down and comes back
    let appends = 0;
    let open!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    const store = ctx.services.store;
    const held = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'append' || prop === 'appendMany') {
          return async (...args: unknown[]) => {
            if (++appends >= 5) await opened;
            return (target[prop] as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          };
        }
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    }) as EventStore;
    const consumer = await startConversationConsumer({ ...ctx.services, store: held }, { topic: TOPIC, groupId: GROUP });
    try {
      await waitFor('the consumer to be held mid-batch', () => appends >= 5, 60_000);
      await broker.stop();
      open();
      await sleep(3_000); // the held records finish while the broker is down
      await broker.start();

      const recorded = async () =>
        (await ctx.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM es.events WHERE type = 'MessageRecorded' AND data->>'messageId' LIKE 'r15-restart-%'`)).rows[0].n;
      const deadline = Date.now() + 120_000;
      while ((await recorded()) < N) {
        if (Date.now() > deadline) throw new Error(`${await recorded()} of ${N} messages recorded after the restart`);
        await sleep(250);
      }
      // and the group's offsets reach the end (nothing left to redeliver)
      const inspector = new Kafka({ clientId: 'review15-inspector-2', brokers: [broker.brokers], logLevel: logLevel.NOTHING }).admin();
      await inspector.connect();
      try {
        for (;;) {
          const [offsets] = await inspector.fetchOffsets({ groupId: GROUP, topics: [TOPIC] });
          const high = await inspector.fetchTopicOffsets(TOPIC);
          if (high.every((h) => offsets.partitions.find((p) => p.partition === h.partition)?.offset === h.high)) break;
          if (Date.now() > deadline) throw new Error(`offsets ${JSON.stringify(offsets.partitions)} of ${JSON.stringify(high)}`);
          await sleep(250);
        }
      } finally {
        await inspector.disconnect();
      }
      expect(await recorded()).toBe(N);
    } finally {
      await consumer.stop();
    }
  }, 300_000);
});
