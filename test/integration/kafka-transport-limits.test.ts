// KafkaTransport against a real Kafka broker: produce requests stay under the broker's size limit (default
// message.max.bytes, ~1 MB), and close() while a consumer is (re)starting leaves no consumer running.
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport, RecordTooLargeError, type TransportLogger } from '../../src/adapters/kafka/transport';
import type { IncomingRecord } from '../../src/ports/transport';
import { PROVIDER_WEBHOOK_TOPIC, statusWebhook } from '../../src/shared/provider-webhook';
import { prefixedTransport } from '../support/prefixed-transport';
import { postWebhook } from '../support/sends';
import { createTestApp } from '../support/services';
import { uniqueTopicAndGroup, waitFor } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) {
  console.warn(`Kafka transport limit tests skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);
}

const brokers = () => BROKERS!.split(',');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const unique = uniqueTopicAndGroup;

const quiet: TransportLogger = { debug() {}, info() {}, warn() {}, error() {} };

/** A status-like record value of about `bytes` bytes. */
const statusOf = (n: number, bytes: number) => ({ id: `wamid.${n}`, status: 'delivered', pad: 'x'.repeat(Math.max(0, bytes - 60)) });

d('KafkaTransport request size limits and close (real broker)', () => {
  const transports: KafkaTransport[] = [];
  /** topics this transport creates get ONE partition: a partition's share of a request is the whole request */
  const newTransport = (extra: Partial<ConstructorParameters<typeof KafkaTransport>[0]> = {}) => {
    const t = new KafkaTransport({ brokers: brokers(), clientId: 'switchboard-test-limits', logger: quiet, numPartitions: 1, ...extra });
    transports.push(t);
    return t;
  };
  const kafka = () => new Kafka({ clientId: 'switchboard-test-inspector', brokers: brokers(), logLevel: logLevel.NOTHING });

  async function withAdmin<T>(fn: (admin: ReturnType<ReturnType<typeof kafka>['admin']>) => Promise<T>): Promise<T> {
    const admin = kafka().admin();
    await admin.connect();
    try {
      return await fn(admin);
    } finally {
      await admin.disconnect();
    }
  }
  const recordsIn = (topic: string) =>
    withAdmin(async (admin) => (await admin.fetchTopicOffsets(topic)).reduce((sum, p) => sum + Number(p.high), 0));
  const createTopic = (topic: string, configEntries: Array<{ name: string; value: string }> = []) =>
    withAdmin((admin) => admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1, configEntries }] }));
  /** Reads a topic from the beginning until `count` records were seen. */
  async function readAll(topic: string, count: number): Promise<IncomingRecord[]> {
    const reader = newTransport();
    const seen: IncomingRecord[] = [];
    const sub = await reader.subscribe(topic, async () => undefined, { groupId: `${topic}-reader`, batchHandler: async (rs) => (seen.push(...rs), rs.map(() => ({ kind: 'ok' as const }))) });
    await waitFor(`${count} records of ${topic}`, () => seen.length >= count, 60_000);
    await sub.stop();
    return seen;
  }

  afterEach(async () => {
    await Promise.allSettled(transports.splice(0).map((t) => t.close()));
  });

  it('30 concurrent publishes of 100 records each, together over the broker limit on one partition: all acknowledged', async () => {
    const { topic } = unique('limits-concurrent');
    const t = newTransport();
    await t.publish(topic, [{ key: 'warm-up', value: { n: -1 } }]); // the topic exists (1 partition), the producer is connected
    const callers = 30;
    const perCaller = 100;
    // ~500 bytes a record: 50 KB a publish (each alone is fine), ~1.5 MB together (over message.max.bytes)
    const results = await Promise.allSettled(
      Array.from({ length: callers }, (_, c) =>
        t.publish(topic, Array.from({ length: perCaller }, (_, i) => ({ key: `contact-${c}`, value: statusOf(c * perCaller + i, 500) }))),
      ),
    );
    expect(results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
    expect(await recordsIn(topic)).toBe(1 + callers * perCaller);
  });

  it('one publish of 16,000 records (over 2 MB): split over several requests, resolves once all are written, in order', async () => {
    const { topic } = unique('limits-split');
    const t = newTransport();
    const total = 16_000;
    await t.publish(topic, Array.from({ length: total }, (_, n) => ({ key: `wamid.${n}`, value: { n, ...statusOf(n, 130) } })));
    expect(await recordsIn(topic)).toBe(total); // resolved => every part acknowledged
    const seen = await readAll(topic, total);
    expect(seen.length).toBe(total);
    expect(seen.every((r, i) => (r.value as { n: number }).n === i)).toBe(true);
  }, 90_000);

  it('a record larger than a request may be fails only its own publish, with a clear error', async () => {
    const { topic } = unique('limits-huge');
    const t = newTransport();
    await t.publish(topic, [{ key: 'warm-up', value: { n: -1 } }]);
    const small = (c: number) => t.publish(topic, [{ key: `small-${c}`, value: statusOf(c, 200) }]);
    const results = await Promise.allSettled([
      small(0),
      small(1),
      t.publish(topic, [{ key: 'huge', value: statusOf(-2, 1_200_000) }]), // ~1.2 MB: over the broker's limit
      small(2),
      small(3),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    const err = (results[2] as PromiseRejectedResult).reason;
    expect(err).toBeInstanceOf(RecordTooLargeError);
    expect(String(err.message)).toMatch(/larger than one produce request may carry/);
    expect(await recordsIn(topic)).toBe(1 + 4);
  });

  it('a request the broker still refuses as too large (topic limit below the cap) is retried publish by publish: only the offending one fails', async () => {
    const { topic } = unique('limits-topic-cap');
    await createTopic(topic, [{ name: 'max.message.bytes', value: String(64 * 1024) }]);
    const t = newTransport();
    await t.publish(topic, [{ key: 'warm-up', value: { n: -1 } }]);
    // each ~20 KB publish fits the topic's 64 KB; together they do not; the 100 KB one never does
    const ok = (c: number) => t.publish(topic, Array.from({ length: 10 }, (_, i) => ({ key: `k-${c}`, value: statusOf(c * 10 + i, 2_000) })));
    const results = await Promise.allSettled([
      ok(0),
      ok(1),
      ok(2),
      t.publish(topic, [{ key: 'too-big-for-topic', value: statusOf(-2, 100_000) }]),
      ok(3),
      ok(4),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((results[3] as PromiseRejectedResult).reason).toBeInstanceOf(RecordTooLargeError);
    expect(await recordsIn(topic)).toBe(1 + 5 * 10);
  });

  it('dead letters of a whole slice of poison records (over the broker limit together) are written at once, none retried', async () => {
    const { topic, groupId } = unique('limits-dlq');
    const publisher = newTransport();
    const count = 5_000;
    // small records, published 1,000 at a time; their dead letters carry a long reason: ~2 MB for one slice
    for (let n = 0; n < count; n += 1_000) {
      await publisher.publish(topic, Array.from({ length: 1_000 }, (_, i) => ({ key: `k-${(n + i) % 7}`, value: statusOf(n + i, 100) })));
    }
    const reason = `status of an unknown message: ${'r'.repeat(250)}`;
    const warnings: string[] = [];
    const logger: TransportLogger = { ...quiet, warn: (_obj, msg) => void warnings.push(msg ?? '') };
    const consumer = newTransport({ logger, retryInitialMs: 20 });
    let deadLettered = 0;
    await consumer.subscribe(topic, async () => undefined, {
      groupId,
      maxBatchRecords: count,
      batchHandler: async (records) => records.map(() => ({ kind: 'poison' as const, reason })),
      onDeadLetter: () => void deadLettered++,
    });
    const retried = () => warnings.some((m) => /retrying/.test(m));
    await waitFor('every dead letter (or a refused one)', () => deadLettered === count || retried(), 60_000);
    expect(warnings.filter((m) => /retrying/.test(m))).toEqual([]); // no dead-letter write was refused
    expect(deadLettered).toBe(count);
    expect(await recordsIn(`${topic}.dlq`)).toBe(count);
  }, 90_000);

  it('a signed 2 MB provider webhook (16,000 statuses) over Kafka is answered 200 and all its records are written', async () => {
    const prefix = `test-limits-${randomBytes(4).toString('hex')}.`;
    const kafkaTransport = newTransport();
    const app = await createTestApp({ transport: prefixedTransport(kafkaTransport, prefix), runner: false });
    try {
      const statuses = Array.from({ length: 16_000 }, (_, n) => ({
        phoneNumberId: '100200300',
        providerMessageId: `wamid.HBgLNTQ5MTE1NTU1MTIzNBUCABEYEjk${String(n).padStart(8, '0')}`,
        status: 'delivered' as const,
        timestamp: '1772359205',
        recipientId: '5491155551234',
      }));
      const body = statusWebhook(statuses);
      expect(JSON.stringify(body).length).toBeGreaterThan(2_000_000);
      const res = await postWebhook(app.app, body);
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: { received: 16_000 } });
      expect(await recordsIn(prefix + PROVIDER_WEBHOOK_TOPIC)).toBe(16_000);
    } finally {
      await app.close();
    }
  }, 90_000);

  it('close() while its consumer is still starting: no consumer keeps running for the closed transport', async () => {
    for (const delayMs of [0, 5, 50]) {
      const { topic, groupId } = unique(`limits-close-${delayMs}`);
      const closing = newTransport();
      const handled: IncomingRecord[] = [];
      const subscribed = closing.subscribe(topic, async (r) => void handled.push(r), { groupId }).catch(() => undefined);
      await sleep(delayMs);
      await closing.close();
      await subscribed;

      // records arrive after the close; a consumer of another group shows when they are readable
      const other = newTransport();
      await other.publish(topic, [0, 1].map((n) => ({ key: 'k', value: { n } })));
      const control: IncomingRecord[] = [];
      await other.subscribe(topic, async (r) => void control.push(r), { groupId: `${groupId}-control` });
      await waitFor('the control consumer', () => control.length === 2);
      await sleep(1_500); // a consumer left running by the closed transport would have fetched them too by now
      const members = await withAdmin(async (admin) => (await admin.describeGroups([groupId])).groups[0]?.members ?? []);
      expect({ delayMs, handled: handled.length, members: members.length }).toEqual({ delayMs, handled: 0, members: 0 });
    }
  }, 90_000);
});
