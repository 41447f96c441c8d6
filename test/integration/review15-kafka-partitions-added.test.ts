// Partitions added to a topic while its consumer runs (REAL Kafka broker): records written to the new partitions are
// consumed, from their first offset (a new partition has no committed offset: the group starts it from the
// beginning), once the group is rebalanced (a member joins) or once kafkajs refreshes its metadata (every 5 minutes:
// the second test, run with R15_SLOW=1 only).
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport, type TransportLogger } from '../../src/adapters/kafka/transport';
import type { IncomingRecord } from '../../src/ports/transport';
import { uniqueTopicAndGroup, waitFor } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka partitions-added test skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);
const slow = process.env.R15_SLOW === '1' ? it : it.skip;
if (process.env.R15_SLOW !== '1') {
  console.warn('Kafka partitions-added test without a rebalance skipped: it waits for kafkajs\'s metadata refresh (5 minutes); run it with R15_SLOW=1');
}

const quiet: TransportLogger = { debug() {}, info() {}, warn() {}, error() {} };

d('partitions added to a running topic (real broker)', () => {
  const transports: KafkaTransport[] = [];
  const kafka = () => new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const newTransport = () => {
    const t = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-review15', logger: quiet, maxWaitTimeMs: 100 });
    transports.push(t);
    return t;
  };
  afterEach(async () => {
    await Promise.allSettled(transports.splice(0).map((t) => t.close()));
  });

  async function scenario(label: string, rebalance: boolean, timeoutMs: number) {
    const { topic, groupId } = uniqueTopicAndGroup(label);
    const admin = kafka().admin();
    await admin.connect();
    try {
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
      const seen: Array<{ partition: number; offset: string }> = [];
      const handle = async (r: IncomingRecord) => void seen.push({ partition: r.partition!, offset: r.offset! });
      const producer = kafka().producer();
      await producer.connect();
      await newTransport().subscribe(topic, handle, { groupId, batchHandler: async (rs) => (rs.forEach((r) => void handle(r)), rs.map(() => ({ kind: 'ok' as const }))) });
      await producer.send({ topic, messages: [{ partition: 0, value: JSON.stringify({ n: 0 }) }] });
      await waitFor('the first record', () => seen.length >= 1, 60_000);

      await producer.disconnect();
      await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] });
      // a platform producer that knows the new partitions at once (a new one: kafkajs's would skip partitions it does
      // not know yet)
      const platform = kafka().producer();
      await platform.connect();
      await platform.send({ topic, messages: [1, 2].flatMap((partition) => [0, 1].map((n) => ({ partition, value: JSON.stringify({ n }) }))) });
      await platform.disconnect();
      // every record the new partitions hold (a producer's retry on a loaded machine may have written one twice)
      const written = (await admin.fetchTopicOffsets(topic)).filter((o) => o.partition > 0)
        .flatMap((o) => Array.from({ length: Number(o.high) }, (_, i) => `${o.partition}/${i}`)).sort();
      expect(written).toEqual(expect.arrayContaining(['1/0', '1/1', '2/0', '2/1']));
      if (rebalance) await newTransport().subscribe(topic, handle, { groupId, batchHandler: async (rs) => (rs.forEach((r) => void handle(r)), rs.map(() => ({ kind: 'ok' as const }))) });
      const newOnes = () => [...new Set(seen.filter((s) => s.partition > 0).map((s) => `${s.partition}/${s.offset}`))].sort();
      await waitFor('the records of the new partitions', () => newOnes().length >= written.length, timeoutMs);
      expect(newOnes()).toEqual(written);
    } finally {
      await admin.disconnect();
    }
  }

  it('once a member joins', () => scenario('review15-partitions-join', true, 90_000), 150_000);
  slow('without any rebalance, once the metadata is refreshed', () => scenario('review15-partitions-refresh', false, 400_000), 480_000);
});
