// Review 13 (2026-11-28): a provider notification too large for Kafka is dead-lettered as a reference and logged
// (warn, the default level shows it). The log line carried the whole reference, the customer's phone number with it
// (a status's `recipientId`, an inbound message's `from`). Now the log line has the ids, kind, status or type and
// size; the phone stays only in the dead-letter record (docs/reliability.md, "What is logged (2026-11-28)").
// REAL Kafka broker (skipped, with the reason, when none could be had: test/support/kafka.mjs).
import { randomBytes } from 'node:crypto';
import { KafkaTransport, type TransportLogger } from '../../src/adapters/kafka/transport';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { buildApp } from '../../src/http/app';
import { httpLoggerOptions } from '../../src/observability/logging';
import { prefixedTransport } from '../support/prefixed-transport';
import { postWebhook, SHOP, sendsFixture, unix } from '../support/sends';
import { createTestContext } from '../support/services';
import { logRef } from '../../src/observability/logging';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`review13 too-large notification log skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

const NOW = '2026-03-01T10:00:00.000Z';
const PN = SHOP.number.phoneNumberId;
const RECIPIENT = '5491155557781';
const SENDER = '5491155557782';
const quiet: TransportLogger = { debug() {}, info() {}, warn() {}, error() {} };

d('review13: the too-large notification log line holds no customer phone (real broker)', () => {
  const prefix = `test-review13-large-${randomBytes(4).toString('hex')}.`;
  let ctx: Awaited<ReturnType<typeof createTestContext>>;
  let app: Awaited<ReturnType<typeof buildApp>>;
  const logged: any[] = [];

  beforeAll(async () => {
    const transport = prefixedTransport(new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-review13', logger: quiet, maxWaitTimeMs: 100 }), prefix);
    ctx = await createTestContext({ transport, now: () => new Date(NOW), runner: false });
    app = await buildApp(ctx.services, { logger: httpLoggerOptions('info', { write: (line: string) => void logged.push(JSON.parse(line)) }) });
    await app.ready();
    await seedFixture(ctx.services, sendsFixture(), { actor: 'test' });
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await ctx?.close();
  }, 60_000);

  it('logs each reference with its ids and size, without recipientId or from', async () => {
    const huge = 'x'.repeat(1_000_000);
    const res = await postWebhook(app, {
      object: 'whatsapp_business_account',
      entry: [{ id: 'WABA', changes: [{ field: 'messages', value: {
        messaging_product: 'whatsapp',
        metadata: { display_phone_number: '541100000031', phone_number_id: PN },
        statuses: [{ id: 'wamid.R13-HUGE', status: 'failed', timestamp: unix(NOW), recipient_id: RECIPIENT, errors: [{ code: 131000, title: 'x', error_data: { details: huge } }] }],
        messages: [{ from: SENDER, id: 'wamid.R13-HUGE-IN', timestamp: unix(NOW), type: 'text', text: { body: huge } }],
      } }] }],
    });
    expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: { received: 2 } });
    const lines = logged.filter((l) => /too large for the transport/.test(l.msg));
    expect(lines.map((l) => l.notification).sort((a, b) => a.id.localeCompare(b.id))).toEqual([
      { kind: 'status', phoneNumberId: PN, displayPhoneNumber: '541100000031', id: logRef('wamid.R13-HUGE'), status: 'failed', timestamp: unix(NOW), receivedAt: NOW, bytes: expect.any(Number) },
      { kind: 'message', phoneNumberId: PN, displayPhoneNumber: '541100000031', id: logRef('wamid.R13-HUGE-IN'), type: 'text', timestamp: unix(NOW), receivedAt: NOW, bytes: expect.any(Number) },
    ]);
    const text = JSON.stringify(logged);
    expect(text).not.toContain(RECIPIENT);
    expect(text).not.toContain(SENDER);
  }, 90_000);
});
