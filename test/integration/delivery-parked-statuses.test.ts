// Statuses whose provider message id has no known owner yet, over the REAL Kafka broker and Postgres
// (docs/sends.md, "Delivery consumer"): after the short in-place wait they are parked in Postgres and the partition
// moves on; the sweeper applies them once a send owns the id, or dead-letters them after the grace period.
// One partition (as in the reproduction: an unknown status, then a real one behind it). Skipped, with the reason,
// when no broker could be had.
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import { seedFixture } from '../../src/commands/provisioning/seed';
import type { MessagingProvider, SendTemplateRequest, SendTemplateResult } from '../../src/ports/provider';
import type { Subscription } from '../../src/ports/transport';
import { PROVIDER_WEBHOOK_TOPIC } from '../../src/shared/provider-webhook';
import { DELIVERY_GROUP_ID, type DeliveryConsumerOptions, startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { prefixedTransport } from '../support/prefixed-transport';
import { createTestApp } from '../support/services';
import { eventsOf, postWebhook, SHOP, sendsFixture, statusBody, waitUntil } from '../support/sends';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`parked delivery statuses over Kafka skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const NOW = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';
const PN = SHOP.number.phoneNumberId;
/** long enough that nothing expires unless a test shortens it (a status held in place would hold the partition this long) */
const LONG_GRACE: DeliveryConsumerOptions = { ownerGraceMs: 600_000, ownerWaitMs: 50, parkedSweepMs: 50 };

/** The sandbox, except that the next send can be given the provider id the test chose (its owner then appears). */
class ChosenIdProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  nextId: string | undefined;
  private readonly sandbox = new SandboxProvider({ delivery: 'off' });
  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    const result = await this.sandbox.sendTemplate(request);
    const providerMessageId = this.nextId ?? result.providerMessageId;
    this.nextId = undefined;
    return { providerMessageId };
  }
}

d('parked delivery statuses over Kafka (real broker)', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let consumer: Subscription | undefined;
  const provider = new ChosenIdProvider();
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  const prefix = `test-parked-${randomBytes(4).toString('hex')}.`;
  const run = randomBytes(3).toString('hex');
  const kafkaAdmin = () => new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();

  /** Resolves once the delivery group has committed every record published so far (all were handled). */
  async function drained(): Promise<void> {
    const admin = kafkaAdmin();
    await admin.connect();
    try {
      const topic = prefix + PROVIDER_WEBHOOK_TOPIC;
      await waitUntil(async () => {
        const high = await admin.fetchTopicOffsets(topic);
        const [committed] = await admin.fetchOffsets({ groupId: prefix + DELIVERY_GROUP_ID, topics: [topic] });
        const at = new Map(committed.partitions.map((p) => [p.partition, Number(p.offset)]));
        return high.every((p) => Number(p.high) === 0 || at.get(p.partition) === Number(p.high)) ? true : undefined;
      }, 30_000, 'the delivery consumer to drain the topic');
    } finally {
      await admin.disconnect();
    }
  }

  /** The records in the dead-letter topic so far: key, reason and original topic. */
  async function deadLetters(): Promise<Array<{ key: string | null; reason: string | undefined; originalTopic: string | undefined }>> {
    const admin = kafkaAdmin();
    await admin.connect();
    const topic = `${prefix}${PROVIDER_WEBHOOK_TOPIC}.dlq`;
    let expected = 0;
    try {
      if (!(await admin.listTopics()).includes(topic)) return [];
      expected = (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
    } finally {
      await admin.disconnect();
    }
    if (expected === 0) return [];
    const kafka = new Kafka({ clientId: 'switchboard-test-dlq-reader', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING });
    const reader = kafka.consumer({ groupId: `${prefix}dlq-reader-${randomBytes(4).toString('hex')}`, maxWaitTimeInMs: 100 });
    const out: Array<{ key: string | null; reason: string | undefined; originalTopic: string | undefined }> = [];
    await reader.connect();
    try {
      await reader.subscribe({ topic, fromBeginning: true });
      await reader.run({
        eachMessage: async ({ message }) => {
          out.push({
            key: message.key?.toString() ?? null,
            reason: message.headers?.['x-dlq-reason']?.toString(),
            originalTopic: message.headers?.['x-original-topic']?.toString(),
          });
        },
      });
      await waitUntil(async () => (out.length >= expected ? true : undefined), 30_000, 'the dead letters to be read');
    } finally {
      await reader.disconnect();
    }
    return out;
  }

  beforeAll(async () => {
    // one partition: every record of these tests is behind the ones posted before it
    const kafka = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-parked', logger: quiet, maxWaitTimeMs: 100, numPartitions: 1 });
    t = await createTestApp({ transport: prefixedTransport(kafka, prefix), provider, now: () => new Date(NOW) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    consumer = await startDeliveryConsumer(t.services, LONG_GRACE);
  }, 120_000);
  afterAll(async () => {
    await consumer?.stop();
    await t?.close();
  }, 60_000);

  const restart = async (options: DeliveryConsumerOptions) => {
    await consumer?.stop();
    consumer = await startDeliveryConsumer(t.services, options);
  };
  const send = async (recipient: string, providerId?: string) => {
    provider.nextId = providerId;
    const res = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: PN, template_name: 'welcome', recipient_phone: recipient },
    });
    expect(res.statusCode).toBe(200);
    return res.json().message_id as string;
  };
  const record = async (id: string) =>
    (await t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, headers: { 'x-api-key': SHOP.key } })).json();
  const until = (id: string, current: string) =>
    waitUntil(async () => {
      const r = await record(id);
      return r.delivery_status?.current === current ? r : undefined;
    }, 30_000, `${id} to be ${current}`);
  const deliveryEvents = async (id: string) => {
    const s = await t.db.pool.query(`SELECT stream_id FROM es.events WHERE type = 'TemplateSendAccepted' AND data->>'providerMessageId' = $1`, [id]);
    return (await eventsOf(t.db.pool, s.rows[0].stream_id)).filter((e) => e.type === 'DeliveryStatusRecorded').map((e) => `${e.data.status}@${e.data.at}`);
  };
  const parked = async (id: string) =>
    (await t.db.pool.query<{ status: string }>('SELECT status FROM public.parked_provider_statuses WHERE provider_message_id = $1 ORDER BY seq', [id])).rows.map((r) => r.status);
  const post = async (body: unknown) => expect((await postWebhook(t.app, body)).statusCode).toBe(200);
  const deadLetterCount = async () => (await t.services.metrics.deadLetters.get()).values.reduce((n, v) => n + v.value, 0);

  it('an unknown status does not hold back its partition: the real status behind it is applied at once; it applies once a send owns its id', async () => {
    const unknown = `wamid.PARKED-${run}-1`;
    await post(statusBody(PN, unknown, 'delivered', T1)); // no send owns it (yet)
    const id = await send('+5491155550501');
    await post(statusBody(PN, id, 'delivered', T1));
    // not after the grace (10 minutes here): the unknown status is parked, the partition moves on
    await until(id, 'delivered');
    await drained();
    expect(await parked(unknown)).toEqual(['delivered']);
    expect(await deliveryEvents(id)).toEqual([`delivered@${T1}`]);

    // a send the provider gives that id: the sweeper applies the parked status, through the live path
    expect(await send('+5491155550502', unknown)).toBe(unknown);
    const r = await until(unknown, 'delivered');
    expect(r.delivery_status).toMatchObject({ current: 'delivered', sent_at: NOW, delivered_at: T1 });
    expect(await deliveryEvents(unknown)).toEqual([`delivered@${T1}`]);
    await waitUntil(async () => ((await parked(unknown)).length === 0 ? true : undefined), 30_000, 'the parked status to be deleted');
    expect(await deadLetters()).toEqual([]);
  }, 120_000);

  it('a redelivered parked record parks once; a later status of a parked id, owner known meanwhile, is parked behind it; both kept across a restart and applied in order', async () => {
    const pid = `wamid.PARKED-${run}-2`;
    await restart({ ...LONG_GRACE, parkedSweepMs: 3_600_000 }); // no sweep while the statuses are posted
    await post(statusBody(PN, pid, 'delivered', T1));
    await post(statusBody(PN, pid, 'delivered', T1)); // the provider delivering the same status again
    await drained();
    expect(await parked(pid)).toEqual(['delivered']);

    // its owner appears while the delivered waits parked; the read that follows must not overtake it
    expect(await send('+5491155550503', pid)).toBe(pid);
    await waitUntil(async () => {
      const r = await t.db.pool.query('SELECT 1 FROM rm_sends.provider_messages WHERE provider_message_id = $1', [pid]);
      return r.rowCount ? true : undefined;
    }, 30_000, 'the owner of the parked id to be projected');
    await post(statusBody(PN, pid, 'read', T2));
    await drained();
    expect(await parked(pid)).toEqual(['delivered', 'read']);
    expect(await deliveryEvents(pid)).toEqual([]);

    // a new consumer (the process restarted): the parked statuses are in Postgres, not in Kafka any more
    await restart(LONG_GRACE);
    await until(pid, 'read');
    // delivered at its own time, then read (applied out of order, the read would have implied delivered at T2)
    expect(await deliveryEvents(pid)).toEqual([`delivered@${T1}`, `read@${T2}`]);
    expect((await record(pid)).delivery_status).toMatchObject({ current: 'read', delivered_at: T1, read_at: T2 });
    await waitUntil(async () => ((await parked(pid)).length === 0 ? true : undefined), 30_000, 'the parked statuses to be deleted');
    expect(await deadLetters()).toEqual([]);
  }, 120_000);

  it('a parked status whose owner never appears is dead-lettered after the grace, with the reason, and counted', async () => {
    const gone = `wamid.PARKED-${run}-3`;
    await post(statusBody(PN, gone, 'delivered', T1));
    await drained();
    expect(await parked(gone)).toEqual(['delivered']);
    const before = await deadLetterCount();

    await restart({ ...LONG_GRACE, ownerGraceMs: 200 });
    await waitUntil(async () => ((await parked(gone)).length === 0 ? true : undefined), 30_000, 'the expired parked status to be dead-lettered');
    expect(await deadLetters()).toEqual([
      { key: gone, reason: `unknown provider message id ${gone} (status delivered) after 200 ms`, originalTopic: prefix + PROVIDER_WEBHOOK_TOPIC },
    ]);
    expect(await deadLetterCount()).toBe(before + 1);
    await restart(LONG_GRACE);
  }, 120_000);
});
