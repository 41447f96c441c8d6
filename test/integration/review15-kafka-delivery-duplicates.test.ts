// Statuses handled twice at the same time (REAL Kafka broker): what a rebalance does at worst, when the partition's
// old owner is still applying a batch while the new owner applies the same records again. Two delivery consumers in
// two groups take every record of provider.webhooks, each with its own caches, at the same time; the provider also
// repeats itself. Each (message, status) must be recorded once, and the status record must be exact.
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import { seedFixture } from '../../src/commands/provisioning/seed';
import type { Subscription } from '../../src/ports/transport';
import { PROVIDER_WEBHOOK_TOPIC, statusWebhook, type StatusNotification } from '../../src/shared/provider-webhook';
import { DELIVERY_GROUP_ID, startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { prefixedTransport } from '../support/prefixed-transport';
import { createTestApp } from '../support/services';
import { eventsOf, eventually, postWebhook, SHOP, sendsFixture, unix, waitUntil } from '../support/sends';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka delivery duplicates test skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const NOW = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';
const PN = SHOP.number.phoneNumberId;
const GROUPS = [DELIVERY_GROUP_ID, `${DELIVERY_GROUP_ID}-twin`];

d('the same statuses applied by two consumers at once (real broker)', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const consumers: Subscription[] = [];
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  const prefix = `test-r15-dup-${randomBytes(4).toString('hex')}.`;

  beforeAll(async () => {
    const kafka = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-r15-dup', logger: quiet, maxWaitTimeMs: 100, numPartitions: 3 });
    t = await createTestApp({ transport: prefixedTransport(kafka, prefix), now: () => new Date(NOW) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  }, 120_000);
  afterAll(async () => {
    await Promise.allSettled(consumers.map((c) => c.stop()));
    await t?.close();
  }, 60_000);

  /** Resolves once every group has committed every record published so far. */
  async function drained(): Promise<void> {
    const admin = new Kafka({ clientId: 'r15-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const topic = prefix + PROVIDER_WEBHOOK_TOPIC;
      await waitUntil(async () => {
        const high = await admin.fetchTopicOffsets(topic);
        for (const group of GROUPS) {
          const [committed] = await admin.fetchOffsets({ groupId: prefix + group, topics: [topic] });
          const at = new Map(committed.partitions.map((p) => [p.partition, Number(p.offset)]));
          if (!high.every((p) => Number(p.high) === 0 || at.get(p.partition) === Number(p.high))) return undefined;
        }
        return true;
      }, 90_000, 'both groups to drain the topic');
    } finally {
      await admin.disconnect();
    }
  }

  it('records each (message, status) once', async () => {
    const N = 16;
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const res = await t.app.inject({
        method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
        payload: { phone_number_id: PN, template_name: 'welcome', recipient_phone: `+54911555507${String(i).padStart(2, '0')}` },
      });
      expect(res.statusCode).toBe(200);
      ids.push(res.json().message_id as string);
    }
    for (const groupId of GROUPS) consumers.push(await startDeliveryConsumer(t.services, { groupId, ownerGraceMs: 30_000 }));

    // half the messages read before delivered, every notification twice, in several bodies
    const statuses: StatusNotification[] = ids.flatMap((id, i) => {
      const delivered = { phoneNumberId: PN, providerMessageId: id, status: 'delivered' as const, timestamp: unix(T1), recipientId: '1' };
      const read = { phoneNumberId: PN, providerMessageId: id, status: 'read' as const, timestamp: unix(T2), recipientId: '1' };
      return i % 2 === 0 ? [delivered, read, delivered] : [read, delivered, read];
    });
    for (let k = 0; k < statuses.length; k += 5) {
      expect((await postWebhook(t.app, statusWebhook(statuses.slice(k, k + 5)))).statusCode).toBe(200);
    }
    await drained();

    for (const [i, id] of ids.entries()) {
      const s = await t.db.pool.query(`SELECT stream_id FROM es.events WHERE type = 'TemplateSendAccepted' AND data->>'providerMessageId' = $1`, [id]);
      const recorded = (await eventsOf(t.db.pool, s.rows[0].stream_id)).filter((e) => e.type === 'DeliveryStatusRecorded').map((e) => `${e.data.status}@${e.data.at}`);
      expect({ id, recorded }).toEqual({ id, recorded: i % 2 === 0 ? [`delivered@${T1}`, `read@${T2}`] : [`delivered@${T2}`, `read@${T2}`] });
      const expected = { current: 'read', sent_at: NOW, delivered_at: i % 2 === 0 ? T1 : T2, read_at: T2, failed_at: null, error_code: null, error_message: null };
      const got = await eventually(
        async () => (await t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, headers: { 'x-api-key': SHOP.key } })).json().delivery_status,
        expected,
      );
      expect(got).toEqual(expected);
    }
  }, 180_000);
});
