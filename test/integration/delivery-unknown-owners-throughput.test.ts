// Statuses whose provider message id no send of ours owns (a number shared with another tool) must not throttle the
// partition (docs/sends.md, "Delivery consumer"). Before, each such status waited `ownerWaitMs` in a lane of its own,
// 16 lanes at once: about 32 of them per second per partition, and our own statuses queued behind them. Now the
// unknown owners of one consumer call wait together, once, then are parked in one statement.
// REAL Kafka broker (one partition) and Postgres; skipped, with the reason, when no broker could be had.
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { keyedSendId } from '../../src/commands/send/keyed';
import { sendTemplate } from '../../src/commands/send/send-template';
import { requestFingerprint } from '../../src/http/idempotency';
import { sendBodySchema } from '../../src/http/routes/sends';
import type { MessagingProvider, SendTemplateRequest, SendTemplateResult } from '../../src/ports/provider';
import type { IncomingRecord, RecordTransport, Subscription } from '../../src/ports/transport';
import { PROVIDER_WEBHOOK_TOPIC, statusWebhook } from '../../src/shared/provider-webhook';
import { DELIVERY_GROUP_ID, type DeliveryConsumerOptions, startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { prefixedTransport } from '../support/prefixed-transport';
import { createTestApp } from '../support/services';
import { eventsOf, postWebhook, SHOP, sendsFixture, statusBody, unix, waitUntil } from '../support/sends';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`unknown-owner statuses over Kafka skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const NOW = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';
const PN = SHOP.number.phoneNumberId;
/** no sweep: a status applied here was applied by the live path, and a parked one stays parked to be counted */
const NO_SWEEP: DeliveryConsumerOptions = { ownerGraceMs: 600_000, parkedSweepMs: 3_600_000 };

/** The sandbox, except that the next send can be given the provider id the test chose, or never be answered. */
class ChosenIdProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  nextId: string | undefined;
  /** the next call never answers (its process died after the provider had the message) */
  hang = false;
  readonly calls: SendTemplateRequest[] = [];
  private readonly sandbox = new SandboxProvider({ delivery: 'off' });
  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    this.calls.push(request);
    if (this.hang) {
      this.hang = false;
      return new Promise<never>(() => {});
    }
    const result = await this.sandbox.sendTemplate(request);
    const providerMessageId = this.nextId ?? result.providerMessageId;
    this.nextId = undefined;
    return { providerMessageId };
  }
}

/** The transport, recording the records of every batch-handler call (what one call of the consumer was given). */
function recordingCalls(inner: RecordTransport, calls: IncomingRecord[][]): RecordTransport {
  return {
    ...inner,
    publish: (topic, records) => inner.publish(topic, records),
    subscribe: (topic, handler, options) =>
      inner.subscribe(topic, handler, {
        ...options,
        batchHandler: options.batchHandler && ((records) => {
          calls.push(records);
          return options.batchHandler!(records);
        }),
      }),
    ping: () => inner.ping(),
    close: () => inner.close(),
  };
}

d('statuses of provider ids no send owns, over Kafka (real broker)', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let consumer: Subscription | undefined;
  const calls: IncomingRecord[][] = [];
  const provider = new ChosenIdProvider();
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  const prefix = `test-unknown-owners-${randomBytes(4).toString('hex')}.`;
  const run = randomBytes(3).toString('hex');

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
      }, 90_000, 'the delivery consumer to drain the topic');
    } finally {
      await admin.disconnect();
    }
  }

  beforeAll(async () => {
    const kafka = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-unknown-owners', logger: quiet, maxWaitTimeMs: 100, numPartitions: 1 });
    t = await createTestApp({ transport: recordingCalls(prefixedTransport(kafka, prefix), calls), provider, now: () => new Date(NOW) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
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
  const current = async (id: string) =>
    (await t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, headers: { 'x-api-key': SHOP.key } })).json()
      .delivery_status?.current;
  const parkedRows = async (ids: readonly string[]) =>
    (await t.db.pool.query<{ id: string; status: string }>(
      'SELECT provider_message_id AS id, status FROM public.parked_provider_statuses WHERE provider_message_id = ANY($1::text[]) ORDER BY seq',
      [ids],
    )).rows;
  const post = async (body: unknown) => expect((await postWebhook(t.app, body)).statusCode).toBe(200);
  const ownerWaits = async () => (await t.services.metrics.deliveryOwnerWaits.get()).values.reduce((n, v) => n + v.value, 0);
  /** consumer calls given at least one status of these provider ids */
  const callsWith = (ids: ReadonlySet<string>, from: number) =>
    calls.slice(from).filter((records) => records.some((r) => ids.has((r.value as any)?.status?.id))).length;
  const unknownStatuses = (ids: readonly string[], status: 'delivered' | 'read', at: string) =>
    statusWebhook(ids.map((id) => ({ phoneNumberId: PN, providerMessageId: id, status, timestamp: unix(at), recipientId: '5491155551234' })));

  it('400 unknown-owner statuses wait once per consumer call and are parked together; our status behind them is applied', async () => {
    await restart(NO_SWEEP); // ownerWaitMs: the default (500 ms)
    const known = await send('+5491155550601');
    const unknown = Array.from({ length: 400 }, (_, n) => `wamid.UNKNOWN-${run}-${n}`);
    const waitsBefore = await ownerWaits();
    const callsBefore = calls.length;

    const postedUnknown = Date.now();
    await post(unknownStatuses(unknown, 'delivered', T1));
    await post(unknownStatuses(unknown.slice(0, 1), 'read', T2)); // a later status of an unknown id: parked behind its first
    // the consumer is at work on them: post our own status behind them
    await waitUntil(async () => ((await parkedRows(unknown)).length > 0 ? true : undefined), 90_000, 'a first unknown status to be parked');
    const postedKnown = Date.now();
    await post(statusBody(PN, known, 'delivered', T1));
    await waitUntil(async () => ((await current(known)) === 'delivered' ? true : undefined), 90_000, 'our status to be applied');
    const knownApplied = Date.now();
    await waitUntil(async () => ((await parkedRows(unknown)).length === 401 ? true : undefined), 90_000, 'every unknown status to be parked');
    const allParked = Date.now();
    await drained();

    const waits = (await ownerWaits()) - waitsBefore;
    const unknownCalls = callsWith(new Set(unknown), callsBefore);
    console.log(
      `400 unknown-owner statuses: all parked ${allParked - postedUnknown} ms after their post; our status posted behind them applied ${knownApplied - postedKnown} ms after its post; `
      + `owner waits ${waits} over ${unknownCalls} consumer call(s) holding unknown statuses (${calls.length - callsBefore} calls in all)`,
    );
    // at most one wait per consumer call holding unknown owners (before: one per status; the call with the read of a
    // parked id parks it behind the delivered without a wait)
    expect(waits).toBeGreaterThanOrEqual(1);
    expect(waits).toBeLessThanOrEqual(unknownCalls);
    const rows = await parkedRows(unknown);
    expect(new Set(rows.map((r) => r.id))).toEqual(new Set(unknown));
    expect(rows.filter((r) => r.id === unknown[0]).map((r) => r.status)).toEqual(['delivered', 'read']);
    expect(await current(known)).toBe('delivered');
  }, 300_000);

  it('an owner recorded during the wait is applied directly, not parked, in a call with unknown owners', async () => {
    await restart({ ...NO_SWEEP, ownerWaitMs: 10_000 });
    const racing = `wamid.RACE-${run}`;
    const unknown = Array.from({ length: 20 }, (_, n) => `wamid.UNKNOWN-RACE-${run}-${n}`);
    const waitsBefore = await ownerWaits();
    const callsBefore = calls.length;

    await post(unknownStatuses([...unknown, racing], 'delivered', T1)); // no send owns any of them yet
    expect(await send('+5491155550602', racing)).toBe(racing); // the common race: the acceptance recorded after its status arrived
    await waitUntil(async () => ((await current(racing)) === 'delivered' ? true : undefined), 90_000, 'the racing status to be applied');
    await drained();

    // the sweeper does not run: applied by the consumer itself, never parked
    expect(await parkedRows([racing])).toEqual([]);
    expect(new Set((await parkedRows(unknown)).map((r) => r.id))).toEqual(new Set(unknown));
    const waits = (await ownerWaits()) - waitsBefore;
    expect(waits).toBeGreaterThanOrEqual(1);
    expect(waits).toBeLessThanOrEqual(callsWith(new Set([...unknown, racing]), callsBefore));
  }, 300_000);

  it('a status naming a keyed send that lost its answer is reconciled after the common wait, not parked', async () => {
    await restart(NO_SWEEP);
    const body = { phone_number_id: PN, template_name: 'welcome', recipient_phone: '+5491155550603' };
    const key = `order-${run}`;
    provider.hang = true; // the first attempt's process dies once the provider has the message
    const calls = provider.calls.length;
    void sendTemplate(t.services, {
      companyId: SHOP.companyId, actor: 'key-1', phoneNumberId: PN, templateName: 'welcome', language: 'es', recipientPhone: body.recipient_phone,
      variables: {}, buttonVariables: {}, idempotency: { key, fingerprint: requestFingerprint('POST', '/api/v1/platform-templates/send/', {}, sendBodySchema.parse(body)) },
    });
    await waitUntil(async () => (provider.calls.length > calls ? true : undefined), 30_000, 'the provider call');
    const sendId = keyedSendId(SHOP.companyId, key, 0);
    expect(provider.calls[calls].clientReference).toBe(sendId);

    const wamid = `wamid.RECONCILED-${run}`;
    const unknown = Array.from({ length: 20 }, (_, n) => `wamid.UNKNOWN-REF-${run}-${n}`);
    await post(statusWebhook([
      ...unknown.map((id) => ({ phoneNumberId: PN, providerMessageId: id, status: 'delivered' as const, timestamp: unix(T1), recipientId: '5491155551234' })),
      { phoneNumberId: PN, providerMessageId: wamid, status: 'delivered', timestamp: unix(T1), recipientId: '5491155550603', clientReference: sendId },
    ]));
    await waitUntil(async () => ((await current(wamid)) === 'delivered' ? true : undefined), 90_000, 'the reconciled send to be delivered');
    await drained();
    expect((await eventsOf(t.db.pool, `send-${sendId}`)).map((e) => e.type)).toEqual(['TemplateSendRequested', 'TemplateSendAccepted', 'DeliveryStatusRecorded']);
    expect(await parkedRows([wamid])).toEqual([]);
    expect(new Set((await parkedRows(unknown)).map((r) => r.id))).toEqual(new Set(unknown));
  }, 300_000);
});
