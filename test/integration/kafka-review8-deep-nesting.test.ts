// A record nesting its JSON very deep (REAL Kafka broker). JSON.parse takes any depth, but JSON.stringify (the
// event append, the parked-status insert) overflows the stack on it: before, that RangeError was taken for a
// transient failure and the record was retried for ever, stopping its partition. Now a record nesting deeper than
// MAX_JSON_DEPTH (as an HTTP body) is a poison record: dead-lettered with the reason, and the partition goes on.
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import { startConversationConsumer } from '../../src/workers/conversation-consumer';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { createTestContext, type TestContext } from '../support/services';
import { messageRecord, provisionCompany, settle } from '../support/conversation-fixtures';
import { readTopic, uniqueTopicAndGroup } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka deep-nesting tests skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const DEPTH = 100_000;
const deep = () => JSON.parse('['.repeat(DEPTH) + ']'.repeat(DEPTH)) as unknown;
/** JSON text of `value` with the deep array in place of the string "DEEP" (JSON.stringify cannot write it). */
const withDeep = (value: unknown) => JSON.stringify(value).replace('"DEEP"', '['.repeat(DEPTH) + ']'.repeat(DEPTH));

d('a record nesting its JSON deeper than the stack (real broker)', () => {
  let ctx: TestContext;
  const kafka = new Kafka({ clientId: 'review8-deep', brokers: (BROKERS ?? '').split(','), logLevel: logLevel.NOTHING });
  const producer = kafka.producer();

  beforeAll(async () => {
    const transport = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'review8-deep', logger: quiet, numPartitions: 1, maxWaitTimeMs: 100 });
    ctx = await createTestContext({ transport });
    await provisionCompany(ctx.services, { companyId: 802, agents: [] });
    await settle(ctx.services);
    await producer.connect();
  }, 120_000);
  afterAll(async () => {
    await producer.disconnect();
    await ctx?.close();
  }, 60_000);

  async function createTopics(topic: string) {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
    await admin.disconnect();
  }

  it('the test value cannot be written by JSON.stringify', () => {
    expect(() => JSON.stringify(deep())).toThrow(RangeError);
  });

  it('conversation consumer: dead-lettered with the reason; the record behind it is recorded', async () => {
    const { topic, groupId } = uniqueTopicAndGroup('review8-deep-conv');
    await createTopics(topic);
    const bad = messageRecord({ companyId: 802, id: 'deep-1', conversationId: 'c-802', classifications: [{ label: 'x', value: 'DEEP' }] });
    await producer.send({
      topic,
      messages: [
        { key: '802', value: withDeep(bad) },
        { key: '802', value: JSON.stringify(messageRecord({ companyId: 802, id: 'after-deep', conversationId: 'c-802' })) },
      ],
    });
    const consumer = await startConversationConsumer(ctx.services, { topic, groupId });
    try {
      const [dead] = await readTopic(kafka, `${topic}.dlq`, 1);
      expect(dead.headers?.['x-dlq-reason']?.toString()).toBe('invalid record: record: nests objects and arrays deeper than 64 levels');
      const deadline = Date.now() + 60_000;
      for (;;) {
        await settle(ctx.services);
        const r = await ctx.services.pool.query(`SELECT message_id FROM rm_conversations.messages WHERE conversation_id IS NOT NULL AND message_id IN ('deep-1', 'after-deep')`);
        if (r.rowCount === 1) {
          expect(r.rows[0].message_id).toBe('after-deep');
          break;
        }
        if (Date.now() > deadline) throw new Error('the record behind the deep one was never recorded');
        await new Promise((res) => setTimeout(res, 200));
      }
    } finally {
      await consumer.stop();
    }
  }, 120_000);

  it('delivery consumer: a status of an unknown provider id (to be parked) is dead-lettered; the status behind it is parked', async () => {
    const { topic, groupId } = uniqueTopicAndGroup('review8-deep-delivery');
    await createTopics(topic);
    const status = (id: string, extra: unknown) => ({ kind: 'status', phoneNumberId: 'pn-802', status: { id, status: 'delivered', timestamp: '1772359205', recipient_id: '5491155550000', pricing: extra } });
    await producer.send({
      topic,
      messages: [
        { key: 'wamid.DEEP', value: withDeep(status('wamid.DEEP', 'DEEP')) },
        { key: 'wamid.BEHIND', value: JSON.stringify(status('wamid.BEHIND', null)) },
      ],
    });
    const consumer = await startDeliveryConsumer(ctx.services, { topic, groupId, ownerWaitMs: 10, ownerGraceMs: 600_000, parkUnknownOwners: true });
    try {
      const [dead] = await readTopic(kafka, `${topic}.dlq`, 1);
      expect(dead.headers?.['x-dlq-reason']?.toString()).toBe('record value nests objects and arrays deeper than 64 levels');
      const deadline = Date.now() + 60_000;
      for (;;) {
        const r = await ctx.services.pool.query(`SELECT provider_message_id FROM public.parked_provider_statuses WHERE provider_message_id IN ('wamid.DEEP', 'wamid.BEHIND')`);
        if (r.rowCount === 1) {
          expect(r.rows[0].provider_message_id).toBe('wamid.BEHIND');
          break;
        }
        if (Date.now() > deadline) throw new Error('the status behind the deep one was never parked');
        await new Promise((res) => setTimeout(res, 200));
      }
    } finally {
      await consumer.stop();
    }
  }, 120_000);
});
