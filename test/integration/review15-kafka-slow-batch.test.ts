// A batch that outlasts the session timeout while another member waits in the group (REAL Kafka broker). kafkajs
// heartbeats only when the consumer loop asks it to, and the loop asked only between records: a record whose
// handling took longer than the session timeout (a slow database) got its member dropped, the partition went to the
// other member, which handled the same records again while the first one was still handling them and then
// appended its (now stale) result. The loop now heartbeats in the background while a handler runs, so the member
// stays in the group and the partition moves only once the record in flight is done.
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport, type TransportLogger } from '../../src/adapters/kafka/transport';
import type { IncomingRecord, SubscribeOptions } from '../../src/ports/transport';
import { uniqueTopicAndGroup, waitFor } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka slow-batch tests skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const quiet: TransportLogger = { debug() {}, info() {}, warn() {}, error() {} };
const SESSION_MS = 6_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Mode = 'batch handler' | 'keyed concurrency' | 'per record';

/** A gate the first consumer's handler waits at when it gets offset 0. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open, isOpen: false };
}

function subscription(mode: Mode, groupId: string, handle: (r: IncomingRecord) => Promise<void>): { handler: (r: IncomingRecord) => Promise<void>; opts: SubscribeOptions } {
  if (mode === 'batch handler') {
    return {
      handler: handle,
      opts: {
        groupId,
        batchHandler: async (records) => {
          for (const r of records) await handle(r);
          return records.map(() => ({ kind: 'ok' as const }));
        },
      },
    };
  }
  return { handler: handle, opts: { groupId, ...(mode === 'keyed concurrency' ? { keyedConcurrency: 4 } : {}) } };
}

d('a batch slower than the session timeout (real broker)', () => {
  const transports: KafkaTransport[] = [];
  const kafka = () => new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const newTransport = () => {
    const t = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-review15', logger: quiet, sessionTimeoutMs: SESSION_MS, maxWaitTimeMs: 100 });
    transports.push(t);
    return t;
  };
  afterEach(async () => {
    await Promise.allSettled(transports.splice(0).map((t) => t.close()));
  });

  it.each<Mode>(['per record', 'keyed concurrency', 'batch handler'])(
    '%s: no other member gets the partition while a record is still being handled',
    async (mode) => {
      const { topic, groupId } = uniqueTopicAndGroup(`review15-slow-${mode.replace(/ /g, '-')}`);
      const admin = kafka().admin();
      await admin.connect();
      try {
        await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
        const producer = kafka().producer();
        await producer.connect();
        await producer.send({ topic, messages: [0, 1, 2].map((n) => ({ key: 'same-key', value: JSON.stringify({ n }) })) });
        await producer.disconnect();

        const held = gate();
        const log: Array<{ who: 'A' | 'B'; offset: string; whileHeld: boolean }> = [];
        let blocked = false;
        const first = subscription(mode, groupId, async (r) => {
          log.push({ who: 'A', offset: r.offset!, whileHeld: !held.isOpen });
          if (r.offset === '0' && !held.isOpen) {
            blocked = true;
            await held.opened; // a handler slower than the session timeout
          }
        });
        await newTransport().subscribe(topic, first.handler, first.opts);
        await waitFor('the first consumer to hold offset 0', () => blocked, 60_000);

        const second = subscription(mode, groupId, async (r) => {
          log.push({ who: 'B', offset: r.offset!, whileHeld: !held.isOpen });
        });
        // not awaited: its start resolves once it has joined, i.e. once the rebalance it starts is over
        const joined = newTransport().subscribe(topic, second.handler, second.opts);
        // more than twice the session timeout, or until the second member got a record meanwhile
        const until = Date.now() + 2.5 * SESSION_MS;
        while (Date.now() < until && !log.some((e) => e.who === 'B')) await sleep(100);
        held.isOpen = true;
        held.open();
        await joined;

        // everything is handled and committed in the end
        await waitFor('offsets 1 and 2 handled', () => ['1', '2'].every((o) => log.some((e) => e.offset === o)), 120_000);
        const deadline = Date.now() + 60_000;
        for (;;) {
          const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
          if (offsets.partitions[0].offset === '3') break;
          if (Date.now() > deadline) throw new Error(`committed offset ${offsets.partitions[0].offset}, not 3`);
          await sleep(200);
        }
        // nothing but the held record was handled while it was held
        expect(log.filter((e) => e.whileHeld && !(e.who === 'A' && e.offset === '0'))).toEqual([]);
      } finally {
        await admin.disconnect();
      }
    },
    180_000,
  );
});
