import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import { startConversationConsumer } from '../../src/workers/conversation-consumer';
import { createTestContext, type TestContext } from '../support/services';
import { messageRecord, provisionCompany, settle } from '../support/conversation-fixtures';

// The `conversation.messages` consumer: records valid chat messages, dead-letters invalid ones with the
// reason, and never duplicates a redelivered record.

async function messageRows(ctx: TestContext) {
  const r = await ctx.services.pool.query('SELECT message_id, deleted FROM rm_conversations.messages ORDER BY message_id');
  return r.rows;
}

async function eventCount(ctx: TestContext): Promise<number> {
  const r = await ctx.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM es.events WHERE stream_id LIKE 'conversation-%'`);
  return r.rows[0].n;
}

const valid = (id: string, over: object = {}) => messageRecord({ companyId: 601, id, conversationId: 'kc-1', ...over });

describe('conversation consumer (in-process transport)', () => {
  let ctx: TestContext;
  let transport: InProcessTransport;
  beforeAll(async () => {
    transport = new InProcessTransport({ retryDelayMs: 1 });
    ctx = await createTestContext({ transport });
    await provisionCompany(ctx.services, { companyId: 601, agents: [{ id: 7, name: 'Bot', version: '1' }] });
    await settle(ctx.services);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('records valid records once, dead-letters invalid ones with the reason', async () => {
    const consumer = await startConversationConsumer(ctx.services);
    try {
      await ctx.services.transport.publish('conversation.messages', [
        { key: '601', value: valid('ip-1') },
        { key: '601', value: valid('ip-1') }, // redelivery
        { key: '601', value: { ...valid('ip-2'), channel: 'PIGEON' } },
        { key: '601', value: valid('ip-3', { direction: 'outbound', author: { type: 'agent', agentId: 8 } }) },
        { key: '601', value: 'not an object' },
        { key: '601', value: valid('ip-4', { deleted: true }) },
      ]);
      await settle(ctx.services);
      expect(await messageRows(ctx)).toEqual([
        { message_id: 'ip-1', deleted: false },
        { message_id: 'ip-4', deleted: true },
      ]);
      expect(await eventCount(ctx)).toBe(3);
      expect(transport.deadLetters.map((d) => [d.topic, d.reason])).toEqual([
        ['conversation.messages.dlq', expect.stringMatching(/^invalid record: channel: must be one of /)],
        ['conversation.messages.dlq', 'UNKNOWN_AGENT: author agent 8 is not an agent of company 601'],
        ['conversation.messages.dlq', 'invalid record: record: must be a JSON object'],
      ]);
      const dlqMetric = await ctx.services.metrics.deadLetters.get();
      expect(dlqMetric.values.find((v) => v.labels.topic === 'conversation.messages')?.value).toBe(3);
    } finally {
      await consumer.stop();
    }
  });
});

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`conversation consumer Kafka test skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

d('conversation consumer (real Kafka broker)', () => {
  let ctx: TestContext;
  let transport: KafkaTransport;
  const id = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const topic = `test.conversation.messages.${id}`;
  const groupId = `test-conversations-${id}`;
  const kafka = new Kafka({ clientId: 'conversation-test', brokers: (BROKERS ?? '').split(','), logLevel: logLevel.NOTHING });

  beforeAll(async () => {
    const quiet = { info() {}, warn() {}, error() {} };
    transport = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test', logger: quiet, numPartitions: 2 });
    ctx = await createTestContext({ transport });
    await provisionCompany(ctx.services, { companyId: 601, agents: [{ id: 7, name: 'Bot', version: '1' }] });
    await settle(ctx.services);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('records valid messages, sends invalid ones to <topic>.dlq with the reason, never duplicates', async () => {
    const producer = kafka.producer();
    await producer.connect();
    const consumer = await startConversationConsumer(ctx.services, { topic, groupId });
    try {
      const send = (value: unknown) => producer.send({ topic, messages: [{ key: '601', value: JSON.stringify(value) }] });
      await send(valid('k-1'));
      await send({ ...valid('k-2'), id: '' });
      await send(valid('k-1')); // redelivered by the platform
      await send(valid('k-3', { direction: 'outbound', author: { type: 'agent', agentId: 7 }, traceId: 'tr-3' }));
      await send(valid('k-3', { direction: 'outbound', author: { type: 'agent', agentId: 7 }, deleted: true }));

      const deadline = Date.now() + 60_000;
      let rows: any[] = [];
      while (Date.now() < deadline) {
        await settle(ctx.services);
        rows = await messageRows(ctx);
        if (rows.length === 2 && rows[1].deleted) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(rows).toEqual([
        { message_id: 'k-1', deleted: false },
        { message_id: 'k-3', deleted: true },
      ]);
      expect(await eventCount(ctx)).toBe(3);

      // the dead letter carries the original record and the reason
      const dlq = kafka.consumer({ groupId: `${groupId}-dlq-reader` });
      await dlq.connect();
      await dlq.subscribe({ topic: `${topic}.dlq`, fromBeginning: true });
      const dead = await new Promise<{ value: any; reason: string }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no dead letter within 60 s')), 60_000);
        void dlq.run({
          eachMessage: async ({ message }) => {
            clearTimeout(timer);
            resolve({ value: JSON.parse(message.value!.toString()), reason: message.headers?.['x-dlq-reason']?.toString() ?? '' });
          },
        });
      });
      await dlq.disconnect();
      expect(dead.value.id).toBe('');
      expect(dead.reason).toBe('invalid record: id: is missing');
    } finally {
      await consumer.stop();
      await producer.disconnect();
    }
  });

  it('a record redelivered after a restart of the consumer group is not recorded twice', async () => {
    const before = await eventCount(ctx);
    // a new group reads the topic from the beginning: every record is delivered again
    const again = await startConversationConsumer(ctx.services, { topic, groupId: `${groupId}-replay` });
    try {
      const admin = kafka.admin();
      await admin.connect();
      const deadline = Date.now() + 40_000;
      let done = false;
      while (!done) {
        if (Date.now() > deadline) throw new Error('the replaying group did not consume the topic within 40 s');
        const lag = await admin.fetchOffsets({ groupId: `${groupId}-replay`, topics: [topic] });
        const high = await admin.fetchTopicOffsets(topic);
        done = high.every((h) => {
          const committed = lag[0].partitions.find((p) => p.partition === h.partition)?.offset ?? '-1';
          return Number(h.high) === 0 || Number(committed) >= Number(h.high);
        });
        if (!done) await new Promise((r) => setTimeout(r, 200));
      }
      await admin.disconnect();
    } finally {
      await again.stop();
    }
    // nothing is recorded twice; k-3 (sent, then sent deleted) passes through its first record again: restored,
    // then deleted again (the latest record decides), and ends as it was
    expect(await eventCount(ctx)).toBe(before + 2);
    await settle(ctx.services);
    expect(await messageRows(ctx)).toEqual([
      { message_id: 'k-1', deleted: false },
      { message_id: 'k-3', deleted: true },
    ]);
  });
});
