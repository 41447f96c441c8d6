// Review 16a (regression review of 92318cd; REAL Kafka broker): with keyed concurrency, a heartbeat that failed in
// the background while a record was held (the group began rebalancing when another member joined) must end the batch
// once the records in flight are done, as in the per-record loop. The keyed loop went on with the rest of each key's
// chain in the window (here offsets 1 and 2 of the same key), making the whole group wait for records it had not yet
// started, and committed them during the rebalance. Now the chain stops: the window goes to the partition's next
// owner (handlers are idempotent; nothing of it was committed).
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport, type TransportLogger } from '../../src/adapters/kafka/transport';
import type { IncomingRecord } from '../../src/ports/transport';
import { uniqueTopicAndGroup, waitFor } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka keyed-rebalance tests skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const quiet: TransportLogger = { debug() {}, info() {}, warn() {}, error() {} };
const SESSION_MS = 6_000; // heartbeats every 600 ms, offered in the background every 300 ms
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

d('keyed concurrency during a rebalance (real broker)', () => {
  const transports: KafkaTransport[] = [];
  const kafka = () => new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING });
  // member ids start with the client id; kafkajs's round-robin assigner gives the one partition to the first in order
  const newTransport = (clientId: string) => {
    const t = new KafkaTransport({ brokers: BROKERS!.split(','), clientId, logger: quiet, sessionTimeoutMs: SESSION_MS, maxWaitTimeMs: 100 });
    transports.push(t);
    return t;
  };
  afterEach(async () => {
    await Promise.allSettled(transports.splice(0).map((t) => t.close()));
  });

  it('a failed heartbeat ends the window after the record in flight: the rest of its key goes to the next owner', async () => {
    const { topic, groupId } = uniqueTopicAndGroup('review16a-keyed-rebalance');
    const admin = kafka().admin();
    await admin.connect();
    try {
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
      const producer = kafka().producer();
      await producer.connect();
      await producer.send({ topic, messages: [0, 1, 2].map((n) => ({ key: 'same-key', value: JSON.stringify({ n }) })) });
      await producer.disconnect();

      let open!: () => void;
      const opened = new Promise<void>((r) => (open = r));
      let holding = false;
      let heldOnce = false;
      const log: Array<{ who: 'A' | 'B'; offset: string }> = [];
      const handlerA = async (r: IncomingRecord) => {
        log.push({ who: 'A', offset: r.offset! });
        if (r.offset === '0' && !heldOnce) {
          heldOnce = true;
          holding = true;
          await opened;
          holding = false;
        }
      };
      // A sorts after B: once the group has rebalanced, the partition is B's
      await newTransport('switchboard-test-review16a-z').subscribe(topic, handlerA, { groupId, keyedConcurrency: 4 });
      await waitFor('A to hold offset 0', () => holding, 60_000);

      // B joins: the group starts rebalancing, and A's background heartbeat is answered REBALANCE_IN_PROGRESS
      const joined = newTransport('switchboard-test-review16a-a').subscribe(topic, async (r) => void log.push({ who: 'B', offset: r.offset! }), { groupId, keyedConcurrency: 4 });
      joined.catch(() => undefined);
      const deadline = Date.now() + 60_000;
      while ((await admin.describeGroups([groupId])).groups[0]?.state !== 'PreparingRebalance') {
        if (Date.now() > deadline) throw new Error('the group never began rebalancing');
        await sleep(100);
      }
      await sleep(8_000); // many of A's background heartbeats (every 300 ms) meet the rebalance, on a loaded machine too
      open();
      await joined;

      await waitFor('offsets 1 and 2 handled', () => ['1', '2'].every((o) => log.some((e) => e.offset === o)), 120_000);
      for (;;) {
        const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
        if (offsets.partitions[0].offset === '3') break;
        if (Date.now() > deadline + 60_000) throw new Error(`committed offset ${offsets.partitions[0].offset}, not 3`);
        await sleep(200);
      }
      // A handled the record it held and started none after it; B, the owner after the rebalance, the whole window
      expect(log.filter((e) => e.who === 'A').map((e) => e.offset)).toEqual(['0']);
      expect(log.filter((e) => e.who === 'B').map((e) => e.offset)).toEqual(['0', '1', '2']);
    } finally {
      await admin.disconnect();
    }
  }, 240_000);
});
