// End to end over the REAL Kafka broker: template send → signed webhook → provider.webhooks → delivery consumer
// → events → sends read model → GET status record. Skipped, with the reason, when no broker could be had.
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { WrongExpectedRevisionError } from '../../src/ports/event-store';
import type { Subscription } from '../../src/ports/transport';
import { statusWebhook, type StatusNotification } from '../../src/shared/provider-webhook';
import { DELIVERY_GROUP_ID, startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { PROVIDER_WEBHOOK_TOPIC } from '../../src/shared/provider-webhook';
import { prefixedTransport } from '../support/prefixed-transport';
import { createTestApp } from '../support/services';
import { countEventsOfType, eventsOf, eventually, postWebhook, SHOP, sendsFixture, statusBody, unix, waitUntil } from '../support/sends';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`delivery over Kafka skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const NOW = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';
const PN = SHOP.number.phoneNumberId;

d('delivery tracking over Kafka (real broker)', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let consumer: Subscription | undefined;
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  const prefix = `test-delivery-${randomBytes(4).toString('hex')}.`;

  /** Records dead-lettered so far (none should be: every record of these tests can be applied). */
  async function deadLettered(): Promise<number> {
    const admin = new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const topic = `${prefix}${PROVIDER_WEBHOOK_TOPIC}.dlq`;
      const topics = await admin.listTopics();
      if (!topics.includes(topic)) return 0;
      return (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
    } finally {
      await admin.disconnect();
    }
  }

  /** Resolves once the delivery group has committed every record published so far (all were handled). */
  async function drained(): Promise<void> {
    const admin = new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();
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

  beforeAll(async () => {
    const kafka = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-delivery', logger: quiet, maxWaitTimeMs: 100 });
    const transport = prefixedTransport(kafka, prefix);
    t = await createTestApp({ transport, now: () => new Date(NOW) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    consumer = await startDeliveryConsumer(t.services, { ownerGraceMs: 30_000 });
  }, 120_000);
  afterEach(async () => {
    expect(await deadLettered()).toBe(0);
  });
  afterAll(async () => {
    await consumer?.stop();
    await t?.close();
  }, 60_000);

  const send = async (recipient: string) => {
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
      return r.delivery_status.current === current ? r : undefined;
    }, 30_000, `${id} to be ${current}`);
  const deliveryEvents = async (id: string) => {
    const s = await t.db.pool.query(`SELECT stream_id FROM es.events WHERE type = 'TemplateSendAccepted' AND data->>'providerMessageId' = $1`, [id]);
    return (await eventsOf(t.db.pool, s.rows[0].stream_id)).filter((e) => e.type === 'DeliveryStatusRecorded').map((e) => `${e.data.status}@${e.data.at}`);
  };
  const post = async (body: unknown) => expect((await postWebhook(t.app, body)).statusCode).toBe(200);

  it('send → delivered → read: the status record shows both timestamps', async () => {
    const id = await send('+5491155550401');
    await post(statusBody(PN, id, 'delivered', T1));
    await post(statusBody(PN, id, 'read', T2));
    const r = await until(id, 'read');
    expect(r.delivery_status).toEqual({
      current: 'read', sent_at: NOW, delivered_at: T1, read_at: T2, failed_at: null, error_code: null, error_message: null,
    });
    expect(await deliveryEvents(id)).toEqual([`delivered@${T1}`, `read@${T2}`]);
  });

  it('read arriving first: delivered implied at the read time; the late delivered changes nothing', async () => {
    const id = await send('+5491155550402');
    await post(statusBody(PN, id, 'read', T2));
    await post(statusBody(PN, id, 'delivered', T1));
    await drained();
    expect(await deliveryEvents(id)).toEqual([`delivered@${T2}`, `read@${T2}`]);
    const expected = { current: 'read', sent_at: NOW, delivered_at: T2, read_at: T2, failed_at: null, error_code: null, error_message: null };
    expect(await eventually(async () => (await record(id)).delivery_status, expected)).toEqual(expected);
  });

  it('duplicates (repeated webhooks and repeated statuses in one body) are applied once', async () => {
    const id = await send('+5491155550404');
    const dup: StatusNotification[] = [
      { phoneNumberId: PN, providerMessageId: id, status: 'sent', timestamp: unix(NOW), recipientId: '5491155550404' },
      { phoneNumberId: PN, providerMessageId: id, status: 'delivered', timestamp: unix(T1), recipientId: '5491155550404' },
      { phoneNumberId: PN, providerMessageId: id, status: 'delivered', timestamp: unix(T1), recipientId: '5491155550404' },
    ];
    await post(statusWebhook(dup));
    await post(statusWebhook(dup));
    await post(statusBody(PN, id, 'read', T2));
    await post(statusBody(PN, id, 'read', T2));
    await post(statusBody(PN, id, 'delivered', T1));
    await drained();
    expect(await deliveryEvents(id)).toEqual([`delivered@${T1}`, `read@${T2}`]);
    const expected = { current: 'read', sent_at: NOW, delivered_at: T1, read_at: T2, failed_at: null, error_code: null, error_message: null };
    expect(await eventually(async () => (await record(id)).delivery_status, expected)).toEqual(expected);
  });

  it('consumer stopped and restarted mid-stream: final states exact, nothing applied twice', async () => {
    const N = 12;
    const ids: string[] = [];
    for (let i = 0; i < N; i++) ids.push(await send(`+54911555506${String(i).padStart(2, '0')}`));
    const before = await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded');

    // The running consumer is replaced by one whose appends stop at a gate after the 3rd: it is stopped while
    // it holds a record and the rest of the batch is unhandled (mid-stream, deterministically).
    await consumer!.stop();
    let appends = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inner = t.services.store;
    const gated = (name: 'append' | 'appendMany') => ({
      value: async (...args: unknown[]) => {
        if (++appends > 3) await gate;
        return (inner[name] as (...a: unknown[]) => Promise<unknown>).apply(inner, args);
      },
    });
    const gatedStore = Object.create(inner, { append: gated('append'), appendMany: gated('appendMany') });
    // one record per batch, so that stopping at the gate leaves most of the fetched records unhandled
    consumer = await startDeliveryConsumer({ ...t.services, store: gatedStore }, { ownerGraceMs: 30_000, maxBatchRecords: 1 });

    await post(statusWebhook(ids.map((id) => ({ phoneNumberId: PN, providerMessageId: id, status: 'delivered' as const, timestamp: unix(T1), recipientId: '1' }))));
    await waitUntil(async () => (appends > 3 ? true : undefined), 30_000, 'the consumer to reach the gate');
    const stopping = consumer.stop();
    release();
    await stopping;
    consumer = undefined;
    const whileStopped = await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded');
    // 3 passed the gate, plus the records in flight at stop (one per partition being consumed, at most 3)
    expect(whileStopped - before).toBeGreaterThan(3);
    expect(whileStopped - before).toBeLessThanOrEqual(6); // the rest of the deliveries were left unhandled

    // while it is down: reads for all, and the deliveries again (the provider repeating itself)
    await post(statusWebhook(ids.map((id) => ({ phoneNumberId: PN, providerMessageId: id, status: 'read' as const, timestamp: unix(T2), recipientId: '1' }))));
    await post(statusWebhook(ids.map((id) => ({ phoneNumberId: PN, providerMessageId: id, status: 'delivered' as const, timestamp: unix(T1), recipientId: '1' }))));
    expect(await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded')).toBe(whileStopped); // nothing consumed while stopped

    consumer = await startDeliveryConsumer(t.services, { ownerGraceMs: 30_000 });
    await drained(); // every record, including those redelivered after the restart, has been handled

    const expected = { current: 'read', sent_at: NOW, delivered_at: T1, read_at: T2, failed_at: null, error_code: null, error_message: null };
    for (const id of ids) {
      expect(await deliveryEvents(id)).toEqual([`delivered@${T1}`, `read@${T2}`]);
      expect(await eventually(async () => (await record(id)).delivery_status, expected)).toEqual(expected);
    }
    expect(await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded')).toBe(before + 2 * N);
  }, 120_000);

  /** Stops the running consumer and starts one over `store` (the test's wrapper of the real one). */
  async function restartWith(store: typeof t.services.store, options: Parameters<typeof startDeliveryConsumer>[1] = {}) {
    await consumer?.stop();
    consumer = await startDeliveryConsumer({ ...t.services, store }, { ownerGraceMs: 30_000, ...options });
  }
  /** A store whose appendMany goes through `wrap` (call number, the appends, the real appendMany). */
  function storeWithAppendMany(
    wrap: (call: number, appends: Parameters<typeof t.services.store.appendMany>[0], real: typeof t.services.store.appendMany) => ReturnType<typeof t.services.store.appendMany>,
  ) {
    const inner = t.services.store;
    let calls = 0;
    let singleAppends = 0;
    const store = Object.create(inner, {
      appendMany: { value: (appends: Parameters<typeof inner.appendMany>[0]) => wrap(++calls, appends, (a) => inner.appendMany(a)) },
      append: { value: (...args: Parameters<typeof inner.append>) => (singleAppends++, inner.append(...args)) },
    }) as typeof inner;
    return { store, calls: () => calls, singleAppends: () => singleAppends };
  }
  const backlog = async (ids: string[]) => {
    // while no consumer runs: every delivered, then every read (webhooks of up to 10 statuses), then all delivered again
    const chunks = (status: 'delivered' | 'read', at: string) => {
      const out = [];
      for (let i = 0; i < ids.length; i += 10) {
        out.push(statusWebhook(ids.slice(i, i + 10).map((id) => ({ phoneNumberId: PN, providerMessageId: id, status, timestamp: unix(at), recipientId: '1' }))));
      }
      return out;
    };
    for (const body of [...chunks('delivered', T1), ...chunks('read', T2), ...chunks('delivered', T1)]) await post(body);
  };
  const expectExact = async (ids: string[], before: number) => {
    const expected = { current: 'read', sent_at: NOW, delivered_at: T1, read_at: T2, failed_at: null, error_code: null, error_message: null };
    for (const id of ids) {
      expect(await deliveryEvents(id)).toEqual([`delivered@${T1}`, `read@${T2}`]);
      expect(await eventually(async () => (await record(id)).delivery_status, expected)).toEqual(expected);
    }
    expect(await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded')).toBe(before + 2 * ids.length);
  };

  it('a backlog is applied in batches (one appendMany per batch, several statuses of a message folded in order)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await send(`+54911555507${String(i).padStart(2, '0')}`));
    const before = await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded');
    await consumer?.stop();
    consumer = undefined;
    await backlog(ids);
    const sizes: number[] = [];
    const { store, singleAppends } = storeWithAppendMany(async (_call, appends, real) => {
      sizes.push(appends.reduce((n, a) => n + a.events.length, 0));
      return real(appends);
    });
    await restartWith(store);
    await drained();
    await expectExact(ids, before);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(2 * ids.length); // every status event went through appendMany
    expect(sizes.length).toBeLessThan(2 * ids.length); // ... in batches, not one by one
    expect(Math.max(...sizes)).toBeGreaterThan(2);
    expect(singleAppends()).toBe(0); // no status took the per-record path
    await restartWith(t.services.store);
  }, 120_000);

  it('a batch append that fails after it committed is retried; a refused batch falls back status by status; each applied once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 24; i++) ids.push(await send(`+54911555508${String(i).padStart(2, '0')}`));
    const before = await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded');
    await consumer?.stop();
    consumer = undefined;
    await backlog(ids);
    const { store, calls, singleAppends } = storeWithAppendMany(async (call, appends, real) => {
      if (call === 1) {
        // the statement committed, then the connection was lost before the answer: a transient failure
        await real(appends);
        throw new Error('Connection terminated unexpectedly');
      }
      if (call === 2) {
        // another consumer stored the first stream's statuses meanwhile: the batch is refused for a revision
        await real([appends[0]]);
        throw new WrongExpectedRevisionError(appends[0].streamId, appends[0].expected, 99n);
      }
      return real(appends);
    });
    await restartWith(store, { maxBatchRecords: 20 });
    await drained();
    expect(calls()).toBeGreaterThan(2);
    expect(singleAppends()).toBeGreaterThan(0); // the refused batch was applied status by status
    await expectExact(ids, before);
    await restartWith(t.services.store);
  }, 120_000);
});
