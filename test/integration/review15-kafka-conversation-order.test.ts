// One chat message's records stay in order across a rebalance (REAL Kafka broker). A conversation consumer whose
// append is stuck (a slow event store) longer than the session timeout while a second consumer joins the group: the
// first one's member was dropped, the second one recorded the message and then its deletion, and the first one's
// stale append landed afterwards as a restore (the message ended visible although its last record deletes it, and
// the log held a restore that no record asked for). The consumer loop now heartbeats while a handler runs
// (src/adapters/kafka/heartbeats.ts): the partition moves only once the record in flight is recorded.
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import type { EventStore } from '../../src/ports/event-store';
import { startConversationConsumer } from '../../src/workers/conversation-consumer';
import { messageRecord, provisionCompany, settle } from '../support/conversation-fixtures';
import { uniqueTopicAndGroup, waitFor } from '../support/kafka-names';
import { createTestContext, type TestContext } from '../support/services';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka conversation order test skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const SESSION_MS = 6_000;
const COMPANY = 615;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The store with its appends held at a gate while it is closed (a stuck database, for one consumer only). */
function heldStore(store: EventStore) {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  const state = { held: 0, isOpen: false };
  const wait = async () => {
    if (state.isOpen) return;
    state.held++;
    await opened;
  };
  const held = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'append') return async (...args: Parameters<EventStore['append']>) => (await wait(), target.append(...args));
      if (prop === 'appendMany') return async (...args: Parameters<EventStore['appendMany']>) => (await wait(), target.appendMany(...args));
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return { store: held, state, release: () => ((state.isOpen = true), open()) };
}

d('a chat message recorded and deleted across a rebalance (real broker)', () => {
  let ctx: TestContext;
  const kafka = new Kafka({ clientId: 'review15-inspector', brokers: (BROKERS ?? '').split(','), logLevel: logLevel.NOTHING });

  beforeAll(async () => {
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    const transport = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-review15', logger: quiet, sessionTimeoutMs: SESSION_MS, maxWaitTimeMs: 100 });
    ctx = await createTestContext({ transport });
    await provisionCompany(ctx.services, { companyId: COMPANY });
    await settle(ctx.services);
  }, 120_000);
  afterAll(async () => {
    await ctx?.close();
  }, 60_000);

  it('ends deleted, with one MessageRecorded and one MessageDeleted, when the first consumer was slow', async () => {
    const { topic, groupId } = uniqueTopicAndGroup('review15-conversation-order');
    const admin = kafka.admin();
    await admin.connect();
    const stops: Array<() => Promise<void>> = [];
    try {
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
      const message = messageRecord({ companyId: COMPANY, id: 'r15-order-1', conversationId: 'r15-conv' });
      const producer = kafka.producer();
      await producer.connect();
      await producer.send({
        topic,
        messages: [message, { ...message, deleted: true }].map((m) => ({ key: String(COMPANY), value: JSON.stringify(m) })),
      });
      await producer.disconnect();

      // the first consumer takes the partition and gets stuck appending the message
      const slow = heldStore(ctx.services.store);
      const first = await startConversationConsumer({ ...ctx.services, store: slow.store }, { topic, groupId });
      stops.push(() => first.stop());
      await waitFor('the first consumer to be held appending', () => slow.state.held > 0, 60_000);

      // a second consumer joins (its start resolves once it has joined: not awaited here)
      const second = startConversationConsumer(ctx.services, { topic, groupId });
      stops.push(async () => (await second).stop());
      const visible = async () =>
        (await ctx.services.pool.query(`SELECT deleted FROM rm_conversations.messages WHERE message_id = 'r15-order-1'`)).rows[0]?.deleted as boolean | undefined;
      const until = Date.now() + 2.5 * SESSION_MS;
      while (Date.now() < until && (await visible()) !== true) await sleep(200);
      slow.release();
      await second;

      // both records consumed and committed
      const deadline = Date.now() + 90_000;
      for (;;) {
        const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
        if (offsets.partitions[0].offset === '2') break;
        if (Date.now() > deadline) throw new Error(`committed offset ${offsets.partitions[0].offset}, not 2`);
        await sleep(200);
      }
      // the first consumer's batch is over once it has stopped (stop waits for the batch in flight)
      await first.stop();
      await settle(ctx.services);
      const events = await ctx.services.pool.query<{ type: string }>(
        `SELECT type FROM es.events WHERE stream_id LIKE 'conversation-${COMPANY}-%' ORDER BY tx_id, seq`,
      );
      expect({ deleted: await visible(), events: events.rows.map((r) => r.type) }).toEqual({ deleted: true, events: ['MessageRecorded', 'MessageDeleted'] });
    } finally {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
      await admin.disconnect();
    }
  }, 240_000);
  it('a consumer stopped while a record is held commits that record only; the next one records the rest once', async () => {
    const { topic, groupId } = uniqueTopicAndGroup('review15-conversation-stop');
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
      const messages = [1, 2, 3, 4, 5].map((n) => messageRecord({ companyId: COMPANY, id: `r15-stop-${n}`, conversationId: 'r15-stop' }));
      const producer = kafka.producer();
      await producer.connect();
      await producer.send({ topic, messages: messages.map((m) => ({ key: String(COMPANY), value: JSON.stringify(m) })) });
      await producer.disconnect();
      const committed = async () => (await admin.fetchOffsets({ groupId, topics: [topic] }))[0].partitions[0].offset;

      const slow = heldStore(ctx.services.store);
      const first = await startConversationConsumer({ ...ctx.services, store: slow.store }, { topic, groupId });
      await waitFor('the consumer to be held appending the first record', () => slow.state.held > 0, 60_000);
      const stopping = first.stop();
      slow.release();
      await stopping;
      expect(await committed()).toBe('1');

      const next = await startConversationConsumer(ctx.services, { topic, groupId });
      try {
        const deadline = Date.now() + 60_000;
        while ((await committed()) !== '5') {
          if (Date.now() > deadline) throw new Error(`committed offset ${await committed()}, not 5`);
          await sleep(200);
        }
      } finally {
        await next.stop();
      }
      const events = await ctx.services.pool.query<{ type: string; n: number }>(
        `SELECT type, count(*)::int AS n FROM es.events WHERE stream_id LIKE 'conversation-${COMPANY}-%' AND data->>'messageId' LIKE 'r15-stop-%' GROUP BY type`,
      );
      expect(events.rows).toEqual([{ type: 'MessageRecorded', n: 5 }]);
    } finally {
      await admin.disconnect();
    }
  }, 180_000);
  it('members joining and leaving mid-stream: each message recorded and deleted once, nothing restored', async () => {
    const { topic, groupId } = uniqueTopicAndGroup('review15-conversation-churn');
    const admin = kafka.admin();
    await admin.connect();
    const running: Array<{ stop(): Promise<void> }> = [];
    try {
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 3 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
      const N = 150;
      const producer = kafka.producer();
      await producer.connect();
      // each message, then its deletion (the latest record wins): a record handled again out of turn shows as a restore
      const records = Array.from({ length: N }, (_, n) => messageRecord({ companyId: COMPANY, id: `r15-churn-${n}`, conversationId: `r15-churn-${n % 7}` }))
        .flatMap((m, n) => [m, { ...m, deleted: true }].map((v) => ({ key: `${COMPANY}-${n % 5}`, value: JSON.stringify(v) })));
      // a slow trickle, so the members change while records are handled
      const producing = (async () => {
        for (let k = 0; k < records.length; k += 10) {
          await producer.send({ topic, messages: records.slice(k, k + 10) });
          await sleep(100);
        }
      })();
      running.push(await startConversationConsumer(ctx.services, { topic, groupId }));
      for (let round = 0; round < 3; round++) {
        await sleep(1_000);
        running.push(await startConversationConsumer(ctx.services, { topic, groupId })); // joins
        await sleep(1_000);
        await running.shift()!.stop(); // the oldest leaves
      }
      await producing;
      await producer.disconnect();
      const high = await admin.fetchTopicOffsets(topic);
      const deadline = Date.now() + 120_000;
      for (;;) {
        const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
        if (high.every((h) => h.high === '0' || offsets.partitions.find((p) => p.partition === h.partition)?.offset === h.high)) break;
        if (Date.now() > deadline) throw new Error(`offsets ${JSON.stringify(offsets.partitions)} of ${JSON.stringify(high)}`);
        await sleep(250);
      }
      for (const c of running.splice(0)) await c.stop();
      const events = await ctx.services.pool.query<{ type: string; n: number }>(
        `SELECT type, count(*)::int AS n FROM es.events WHERE stream_id LIKE 'conversation-${COMPANY}-r15-churn-%' GROUP BY type ORDER BY type`,
      );
      expect(events.rows).toEqual([{ type: 'MessageDeleted', n: N }, { type: 'MessageRecorded', n: N }]);
    } finally {
      for (const c of running) await c.stop().catch(() => undefined);
      await admin.disconnect();
    }
  }, 240_000);
});
