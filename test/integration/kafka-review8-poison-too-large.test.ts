// A poison record whose dead letter would be larger than one produce request (REAL Kafka broker). The broker takes
// records up to its message.max.bytes (about 1 MB); the transport's own requests stop at 900 KB. Before, the
// dead-letter write of such a record (a 950 KB value that is not JSON, or a 500 KB value whose reason quotes a
// 500 KB field) failed with RecordTooLargeError on every retry: its partition stopped there for ever. Now the dead
// letter keeps the reason (shortened) and the record's coordinates, drops what does not fit, and the partition goes
// on. Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { Kafka, logLevel, type KafkaMessage } from 'kafkajs';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import { startConversationConsumer } from '../../src/workers/conversation-consumer';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { sweepParkedStatuses } from '../../src/workers/parked-status-sweeper';
import { parkStatuses } from '../../src/workers/parked-statuses';
import type { IncomingRecord } from '../../src/ports/transport';
import type { ProviderStatusUpdate } from '../../src/commands/delivery-status';
import { createTestContext, type TestContext } from '../support/services';
import { messageRecord, provisionCompany, settle } from '../support/conversation-fixtures';
import { readTopic, uniqueTopicAndGroup } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka too-large poison tests skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

d('a poison record too large to dead-letter as it is (real broker)', () => {
  let ctx: TestContext;
  const kafka = new Kafka({ clientId: 'review8-inspector', brokers: (BROKERS ?? '').split(','), logLevel: logLevel.NOTHING });
  const producer = kafka.producer();

  beforeAll(async () => {
    const transport = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'review8', logger: quiet, numPartitions: 1, maxWaitTimeMs: 100 });
    ctx = await createTestContext({ transport });
    await provisionCompany(ctx.services, { companyId: 801, agents: [] });
    await settle(ctx.services);
    await producer.connect();
  }, 120_000);
  afterAll(async () => {
    await producer.disconnect();
    await ctx?.close();
  }, 60_000);

  const header = (m: KafkaMessage, name: string) => m.headers?.[name]?.toString();

  it('conversation consumer: a 950 KB value that is not JSON is dead-lettered and the record behind it is recorded', async () => {
    const { topic, groupId } = uniqueTopicAndGroup('review8-conv');
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
    await admin.disconnect();
    await producer.send({
      topic,
      messages: [
        { key: '801', value: `{"id": "${'x'.repeat(950_000)}` },
        { key: '801', value: JSON.stringify(messageRecord({ companyId: 801, id: 'after-huge', conversationId: 'c-801' })) },
      ],
    });
    const consumer = await startConversationConsumer(ctx.services, { topic, groupId });
    try {
      const [dead] = await readTopic(kafka, `${topic}.dlq`, 1, { maxBytesPerPartition: 2 * 1024 * 1024 });
      expect(header(dead, 'x-dlq-reason')).toMatch(/^value is not JSON: /);
      expect(header(dead, 'x-original-topic')).toBe(topic);
      expect(header(dead, 'x-original-offset')).toBe('0');
      expect(header(dead, 'x-dlq-value-omitted')).toBe(String(950_000 + 8));
      expect(dead.key?.toString()).toBe('801');
      const deadline = Date.now() + 60_000;
      for (;;) {
        await settle(ctx.services);
        const r = await ctx.services.pool.query(`SELECT message_id FROM rm_conversations.messages WHERE message_id = 'after-huge'`);
        if (r.rowCount === 1) break;
        if (Date.now() > deadline) throw new Error('the record behind the huge one was never recorded');
        await new Promise((res) => setTimeout(res, 200));
      }
    } finally {
      await consumer.stop();
    }
  }, 120_000);

  it('delivery consumer (batches): a 500 KB record whose reason quotes it is dead-lettered and the partition goes on', async () => {
    const { topic, groupId } = uniqueTopicAndGroup('review8-delivery');
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
    await admin.disconnect();
    await producer.send({
      topic,
      messages: [
        { key: 'k', value: JSON.stringify({ kind: 'k'.repeat(500_000) }) },
        { key: 'k', value: JSON.stringify({ kind: 'small' }) },
      ],
    });
    const consumer = await startDeliveryConsumer(ctx.services, { topic, groupId, parkUnknownOwners: false });
    try {
      const dead = await readTopic(kafka, `${topic}.dlq`, 2, { maxBytesPerPartition: 2 * 1024 * 1024 });
      expect(dead.map((m) => header(m, 'x-original-offset'))).toEqual(['0', '1']);
      const reason = header(dead[0], 'x-dlq-reason')!;
      expect(reason.startsWith(`unknown record kind "${'k'.repeat(100)}`)).toBe(true);
      expect(reason.length).toBeLessThan(5_000);
      expect(header(dead[1], 'x-dlq-reason')).toBe('unknown record kind "small"');
      expect(JSON.parse(dead[1].value!.toString())).toEqual({ kind: 'small' }); // a dead letter that fits is the record as it was
    } finally {
      await consumer.stop();
    }
  }, 120_000);

  it('parked-status sweeper: a parked status near the limit whose owner never appears is dead-lettered (without its value) and deleted', async () => {
    const { topic } = uniqueTopicAndGroup('review8-parked');
    const id = 'wamid.REVIEW8-HUGE';
    const value = { kind: 'status', phoneNumberId: 'pn-1', status: { id, status: 'failed', timestamp: '1772359205', errors: [{ code: 131000, error_data: { details: 'd'.repeat(917_300) } }] } };
    const record = { topic, key: id, value, headers: {}, partition: 0, offset: '7' } as IncomingRecord;
    const update = { providerMessageId: id, status: 'failed', at: '2026-03-01T10:00:05.000Z', timestamp: '1772359205', errorCode: '131000', errorMessage: 'd' } as ProviderStatusUpdate;
    await parkStatuses(ctx.services.pool, [{ record, update }]);
    const reasons: string[] = [];
    const options = { topic, graceMs: 0, intervalMs: 10, apply: async () => undefined, onDeadLetter: (_r: IncomingRecord, reason: string) => void reasons.push(reason) };
    const report = await sweepParkedStatuses(ctx.services, options);
    expect(report).toEqual({ applied: 0, deadLettered: 1, left: 0 });
    expect(reasons).toEqual([`unknown provider message id ${id} (status failed) after 0 ms`]);
    const left = await ctx.services.pool.query('SELECT 1 FROM public.parked_provider_statuses WHERE provider_message_id = $1', [id]);
    expect(left.rowCount).toBe(0);
    const [dead] = await readTopic(kafka, `${topic}.dlq`, 1, { maxBytesPerPartition: 2 * 1024 * 1024 });
    expect(dead.key?.toString()).toBe(id);
    expect(header(dead, 'x-dlq-reason')).toBe(reasons[0]);
    expect(header(dead, 'x-original-offset')).toBe('7');
    expect(Number(header(dead, 'x-dlq-value-omitted'))).toBeGreaterThan(917_300);
  }, 120_000);
});
