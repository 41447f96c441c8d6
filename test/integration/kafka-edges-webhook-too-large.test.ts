// A signed provider webhook holding one status or message too large for Kafka's produce cap (900 KB) over the
// REAL Kafka broker: the body is answered 200, its other records are published and applied, and each too-large
// one is dead-lettered on provider.webhooks.dlq as a reference (ids and size), logged and counted. Before, the
// whole body was answered 503 on every delivery, for ever, and none of it got in.
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport, type TransportLogger } from '../../src/adapters/kafka/transport';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { buildApp } from '../../src/http/app';
import type { Subscription } from '../../src/ports/transport';
import { PROVIDER_WEBHOOK_TOPIC } from '../../src/shared/provider-webhook';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { prefixedTransport } from '../support/prefixed-transport';
import { postWebhook, SHOP, sendsFixture, unix, waitUntil } from '../support/sends';
import { createTestContext } from '../support/services';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`too-large webhook records over Kafka skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const NOW = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:05.000Z';
const PN = SHOP.number.phoneNumberId;
const quiet: TransportLogger = { debug() {}, info() {}, warn() {}, error() {} };

interface Read {
  key: string | null;
  value: any;
  headers: Record<string, string>;
}

d('provider webhook with a record too large for Kafka (real broker)', () => {
  const prefix = `test-edges-large-${randomBytes(4).toString('hex')}.`;
  const kafka = () => new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING });
  let ctx: Awaited<ReturnType<typeof createTestContext>>;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let consumer: Subscription | undefined;
  const logged: any[] = [];

  beforeAll(async () => {
    const transport = prefixedTransport(new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-edges', logger: quiet, maxWaitTimeMs: 100 }), prefix);
    ctx = await createTestContext({ transport, now: () => new Date(NOW) });
    app = await buildApp(ctx.services, { logger: { level: 'warn', stream: { write: (line: string) => void logged.push(JSON.parse(line)) } } });
    await app.ready();
    await seedFixture(ctx.services, sendsFixture(), { actor: 'test' });
    consumer = await startDeliveryConsumer(ctx.services, { ownerGraceMs: 30_000 });
  }, 120_000);
  afterAll(async () => {
    await consumer?.stop();
    await app?.close();
    await ctx?.close();
  }, 60_000);

  /** Every record of a topic so far, from the beginning, with its headers. */
  async function readTopic(topic: string): Promise<Read[]> {
    const admin = kafka().admin();
    await admin.connect();
    const high = await admin.fetchTopicOffsets(topic).finally(() => admin.disconnect());
    const total = high.reduce((n, p) => n + Number(p.high), 0);
    const seen: Read[] = [];
    if (total === 0) return seen;
    const reader = kafka().consumer({ groupId: `${topic}-reader-${randomBytes(3).toString('hex')}`, maxWaitTimeInMs: 100 });
    await reader.connect();
    try {
      await reader.subscribe({ topics: [topic], fromBeginning: true });
      await reader.run({
        eachMessage: async ({ message }) => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(message.headers ?? {})) headers[k] = String(v);
          seen.push({ key: message.key?.toString() ?? null, value: JSON.parse(message.value!.toString()), headers });
        },
      });
      await waitUntil(async () => seen.length >= total, 30_000, `${total} records of ${topic}`);
    } finally {
      await reader.disconnect();
    }
    return seen;
  }

  const send = async (recipient: string) => {
    const res = await app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: PN, template_name: 'welcome', recipient_phone: recipient },
    });
    expect(res.statusCode).toBe(200);
    return res.json().message_id as string;
  };
  const current = async (id: string) =>
    (await app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, headers: { 'x-api-key': SHOP.key } }))
      .json().delivery_status?.current;
  const deadLetterCount = async () =>
    ((await ctx.services.metrics.deadLetters.get()).values.find((v) => v.labels.topic === PROVIDER_WEBHOOK_TOPIC)?.value ?? 0);

  it('answers 200, applies the statuses that fit and dead-letters a reference to each too-large status or message', async () => {
    const delivered = await send('+5491155550501');
    const read = await send('+5491155550502');
    const huge = 'x'.repeat(1_000_000); // one record of ~1 MB: over the 900 KB produce cap on its own
    const status = (id: string, name: string, over: object = {}) => ({ id, status: name, timestamp: unix(T1), recipient_id: '5491155550501', ...over });
    const body = {
      object: 'whatsapp_business_account',
      entry: [{ id: 'WABA', changes: [{ field: 'messages', value: {
        messaging_product: 'whatsapp',
        metadata: { display_phone_number: '541100000031', phone_number_id: PN },
        statuses: [
          status(delivered, 'delivered'),
          status('wamid.HUGE', 'failed', { errors: [{ code: 131000, title: 'Something went wrong', error_data: { details: huge } }] }),
          status(read, 'read'),
        ],
        messages: [{ from: '5491155551234', id: 'wamid.HUGE-IN', timestamp: unix(T1), type: 'text', text: { body: huge } }],
      } }] }],
    };
    const countBefore = await deadLetterCount();

    const res = await postWebhook(app, body);
    expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: { received: 4 } });

    // the records that fit are on provider.webhooks (keys on different partitions: compared as a set), and applied
    expect((await readTopic(prefix + PROVIDER_WEBHOOK_TOPIC)).map((r) => [r.key, r.value.status?.status]).sort()).toEqual(
      [[delivered, 'delivered'], [read, 'read']].sort(),
    );
    await waitUntil(async () => (await current(delivered)) === 'delivered', 30_000, 'the delivered status');
    await waitUntil(async () => (await current(read)) === 'read', 30_000, 'the read status');

    // the too-large ones: a reference each on the dead-letter topic, in the log and in the metric
    const references = (await readTopic(`${prefix}${PROVIDER_WEBHOOK_TOPIC}.dlq`)).sort((a, b) => a.value.kind.localeCompare(b.value.kind)).reverse();
    expect(references.map((r) => ({ key: r.key, value: r.value, reason: r.headers['x-dlq-reason'], from: r.headers['x-original-topic'] }))).toEqual([
      {
        key: 'wamid.HUGE',
        value: {
          kind: 'status', phoneNumberId: PN, displayPhoneNumber: '541100000031', id: 'wamid.HUGE', status: 'failed', recipientId: '5491155550501',
          timestamp: unix(T1), receivedAt: NOW, bytes: expect.any(Number),
        },
        reason: expect.stringMatching(/^status "wamid\.HUGE" is \d+ bytes: too large for the transport, only this reference to it is kept$/),
        from: PROVIDER_WEBHOOK_TOPIC,
      },
      {
        key: '5491155551234',
        value: {
          kind: 'message', phoneNumberId: PN, displayPhoneNumber: '541100000031', id: 'wamid.HUGE-IN', from: '5491155551234', type: 'text',
          timestamp: unix(T1), receivedAt: NOW, bytes: expect.any(Number),
        },
        reason: expect.stringMatching(/^message "wamid\.HUGE-IN" is \d+ bytes/),
        from: PROVIDER_WEBHOOK_TOPIC,
      },
    ]);
    expect(references.every((r) => r.value.bytes > 1_000_000)).toBe(true);
    expect(logged.filter((l) => /too large for the transport/.test(l.msg)).map((l) => [l.notification.id, l.notification.bytes])).toEqual(
      references.map((r) => [r.value.id, r.value.bytes]),
    );
    expect((await deadLetterCount()) - countBefore).toBe(2);
  }, 90_000);

  it('a body whose only record is too large is answered 200 too, with just the reference written', async () => {
    const ids = 'wamid.'.concat('y'.repeat(950_000)); // the id itself is what is too large: the reference keeps a bounded part of it
    const res = await postWebhook(app, {
      object: 'whatsapp_business_account',
      entry: [{ id: 'WABA', changes: [{ field: 'messages', value: {
        metadata: { display_phone_number: '541100000031', phone_number_id: PN },
        statuses: [{ id: ids, status: 'delivered', timestamp: unix(T1), recipient_id: '5491155550501' }],
      } }] }],
    });
    expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: { received: 1 } });
    const references = (await readTopic(`${prefix}${PROVIDER_WEBHOOK_TOPIC}.dlq`)).filter((r) => r.value.id.startsWith('wamid.y'));
    expect(references.map((r) => [r.key, r.value.id, r.value.status])).toEqual([[ids.slice(0, 256), ids.slice(0, 256), 'delivered']]);
  }, 90_000);
});
