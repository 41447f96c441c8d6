// A consumer whose batch keeps failing still takes part in its group's rebalances (REAL Kafka broker): between
// retries it heartbeats, and a failed heartbeat (the group is rebalancing) ends the batch so kafkajs rejoins. A
// second consumer joining the group therefore gets a partition while the first keeps failing, and the first stays
// a member. Before, the batch-handler and keyed loops swallowed the heartbeat's error: the rebalance waited for
// the failing member until its rebalance timeout and then went on without it.
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport, type TransportLogger } from '../../src/adapters/kafka/transport';
import type { SubscribeOptions } from '../../src/ports/transport';
import { uniqueTopicAndGroup, waitFor } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka rebalance edge tests skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const quiet: TransportLogger = { debug() {}, info() {}, warn() {}, error() {} };
const failing = () => Promise.reject(new Error('database unavailable'));

type Mode = 'batch handler' | 'keyed concurrency' | 'per record';

/** Subscription options whose handler records the partition of every record it gets, and answers with `fail`. */
function options(mode: Mode, groupId: string, seen: Set<number>, fail: boolean): { handler: (r: { partition?: number }) => Promise<void>; opts: SubscribeOptions } {
  const handler = async (r: { partition?: number }) => {
    seen.add(r.partition!);
    if (fail) await failing();
  };
  if (mode === 'batch handler') {
    return {
      handler,
      opts: {
        groupId,
        batchHandler: async (records) => {
          for (const r of records) seen.add(r.partition!);
          if (fail) throw new Error('database unavailable');
          return records.map(() => ({ kind: 'ok' as const }));
        },
      },
    };
  }
  return { handler, opts: { groupId, ...(mode === 'keyed concurrency' ? { keyedConcurrency: 4 } : {}) } };
}

d('a consumer whose batch keeps failing during a rebalance (real broker)', () => {
  const transports: KafkaTransport[] = [];
  const kafka = () => new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const newTransport = () => {
    // short retries, waited in place; heartbeats every 600 ms
    const t = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-edges', logger: quiet, sessionTimeoutMs: 6_000, retryInitialMs: 50, retryMaxMs: 200, maxWaitTimeMs: 100 });
    transports.push(t);
    return t;
  };
  afterEach(async () => {
    await Promise.allSettled(transports.splice(0).map((t) => t.close()));
  });

  it.each<Mode>(['batch handler', 'keyed concurrency', 'per record'])(
    '%s: a second consumer gets a partition and the failing one stays in the group',
    async (mode) => {
      const { topic, groupId } = uniqueTopicAndGroup(`edges-rebalance-${mode.replace(/ /g, '-')}`);
      const admin = kafka().admin();
      await admin.connect();
      try {
        await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 2 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
        const producer = kafka().producer();
        await producer.connect();
        await producer.send({ topic, messages: [0, 1].flatMap((partition) => [0, 1, 2].map((n) => ({ partition, key: `k${n}`, value: JSON.stringify({ n }) }))) });
        await producer.disconnect();

        // the first consumer fails every record of both partitions, retrying in place
        const firstSeen = new Set<number>();
        const first = options(mode, groupId, firstSeen, true);
        await newTransport().subscribe(topic, first.handler, first.opts);
        await waitFor('the first consumer failing on both partitions', () => firstSeen.size === 2, 60_000);

        // a second one joins: the group rebalances while the first one's batches keep failing
        const secondSeen = new Set<number>();
        const second = options(mode, groupId, secondSeen, false);
        await newTransport().subscribe(topic, second.handler, second.opts);
        await waitFor('the second consumer to get records', () => secondSeen.size > 0, 120_000);

        const { groups } = await admin.describeGroups([groupId]);
        expect({ members: groups[0].members.length, secondPartitions: secondSeen.size }).toEqual({ members: 2, secondPartitions: 1 });
      } finally {
        await admin.disconnect();
      }
    },
    180_000,
  );
});
