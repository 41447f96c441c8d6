// Review 19 (2026-11-28), privacy: what the logs hold of customers (docs/privacy.md).
//  - A provider message id is `wamid.` + base64 of a structure that starts with the customer's number: the provider's
//    (`wamid.HBgLMTY1MDUwNzY1MjAV…` decodes to `…16505076520…`) and the sandbox's alike. Review 13 logged it in place
//    of the customer's phone, as a neutral reference; it is the phone, base64-encoded. The lines that carry one: the
//    dead-letter lines of provider notifications (the field and the reason), `publishing provider notifications
//    failed` (the error's message and stack), parked statuses, reconciled keyed sends. Now every line shows
//    `wamid.[sha256:<12 hex>]` (`logRef`) instead: found again from the id, no number in it.
//  - A phone number written with `+` in an error's text (a stream id `contactphone-301-+549…`, `upsert of +549…: gave
//    up…`) and a customer's number in a conversation id (`msgapp-<number id>-549…`) are masked the same way.
// Real HTTP, real Postgres, the process logger and the API app's logger as src/main.ts builds them, every level.
import { Writable } from 'node:stream';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { loadConfig } from '../../src/config';
import { assembleServices, createLogger } from '../../src/main';
import { httpLoggerOptions, logRef } from '../../src/observability/logging';
import { WrongExpectedRevisionError } from '../../src/ports/event-store';
import type { Services } from '../../src/services';
import { signWebhook } from '../../src/shared/provider-webhook';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { APP_SECRET, SHOP, sendsFixture, statusBody, unix, waitUntil } from '../support/sends';
import { ServedApp } from '../support/served-app';
import { TEST_ANON_SECRET, TEST_PEPPER } from '../support/services';

const CUSTOMER = '5491155550144'; // a status's recipient
const SENDER = '5491155550166'; // an inbound message's sender

/** A provider message id shaped as the provider's: 0x1c 0x18, the number's length, the number, then a random part. */
function providerStyleId(digits: string, tail: string): string {
  const bytes = Buffer.concat([Buffer.from([0x1c, 0x18, digits.length]), Buffer.from(digits), Buffer.from([0x15, 0x02, 0x00, 0x11, 0x18, 0x12]), Buffer.from(tail), Buffer.from([0])]);
  return `wamid.${bytes.toString('base64')}`;
}

/** Every run of base64 / base64url characters in the text, decoded: what a reader of the log can decode at once. */
function decodedTokens(text: string): string {
  return (text.match(/[A-Za-z0-9+/_=-]{12,}/g) ?? []).map((t) => Buffer.from(t.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('latin1')).join('\n');
}

describe('review19: customers in the log lines', () => {
  const raw: string[] = [];
  const lines = () => raw.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  let db: TestDatabase;
  let services: Services;
  let served: ServedApp | undefined;
  let exportPool: ReturnType<typeof createPool>;
  let base: string;

  const post = async (body: unknown) => {
    const text = JSON.stringify(body);
    const res = await fetch(`${base}/webhooks/provider`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, text) }, body: text });
    return { status: res.status, body: await res.text() };
  };

  beforeAll(async () => {
    const stream = new Writable({ write(chunk, _enc, done) { raw.push(String(chunk)); done(); } });
    db = await createTestDatabase({ poolSize: 20 });
    const config = loadConfig({
      DATABASE_URL: db.url, ANONYMIZATION_SECRET: TEST_ANON_SECRET, API_KEY_PEPPER: TEST_PEPPER, SANDBOX_DELIVERY: 'off',
      LOG_LEVEL: 'trace', PROVIDER_APP_SECRET: APP_SECRET, PROVIDER_VERIFY_TOKEN: 'test-verify-token',
    });
    const logger = createLogger(config, stream); // as main.ts: the process logger at LOG_LEVEL
    exportPool = createPool(db.url, config.export.maxConcurrent);
    const transport = new InProcessTransport();
    services = assembleServices({
      config, secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER }, pool: db.pool, exportPool,
      store: new PostgresEventStore(db.pool), transport, logger,
    });
    served = new ServedApp(services, transport);
    await served.start({
      logger: httpLoggerOptions(config.logLevel, stream), // the API app's logger as main.ts builds it
      beforeWorkers: async () => { await seedFixture(services, sendsFixture(), { actor: 'test' }); },
    });
    base = served.base;
  });
  afterAll(async () => {
    await served?.stop();
    await exportPool?.end();
    await db?.drop();
  });

  it('provider notifications dead-lettered or refused: the lines name the message by logRef, and hold no number', async () => {
    const unknown = providerStyleId(CUSTOMER, '9A3CA5B3D4CD6E67E7');
    const badTime = providerStyleId(CUSTOMER, '1B2CA5B3D4CD6E67E7');
    const inbound = providerStyleId(SENDER, '7F3CA5B3D4CD6E67E7');
    expect(Buffer.from(unknown.slice(6), 'base64').toString('latin1')).toContain(CUSTOMER); // what the id is

    // a status whose send is not known yet: the in-process ingress answers 503 and logs why (error)
    const refused = await post(statusBody(SHOP.number.phoneNumberId, unknown, 'delivered', '2026-01-01T00:00:00Z', { recipientId: CUSTOMER }));
    expect(refused.status).toBe(503);
    // a status and an inbound message that can never be recorded: dead-lettered (warn)
    expect((await post(statusBody(SHOP.number.phoneNumberId, badTime, 'delivered', '2026-01-01T00:00:00Z', { recipientId: CUSTOMER, timestamp: '99999999999999' }))).status).toBe(200);
    const message = {
      object: 'whatsapp_business_account',
      entry: [{ id: 'waba', changes: [{ field: 'messages', value: {
        messaging_product: 'whatsapp', metadata: { display_phone_number: '', phone_number_id: SHOP.number.phoneNumberId },
        contacts: [{ wa_id: SENDER, profile: { name: 'Zoe Inbound' } }],
        messages: [{ from: SENDER, id: inbound, timestamp: '999999999999', type: 'text', text: { body: 'private words' } }],
      } }] }],
    };
    expect((await post(message)).status).toBe(200);

    const all = await waitUntil(async () => {
      const ls = lines();
      const dead = ls.filter((l) => l.msg === 'provider notification dead-lettered');
      return dead.length >= 2 && ls.some((l) => l.msg === 'publishing provider notifications failed') ? ls : undefined;
    }, 20_000, 'the three log lines');
    const text = raw.join('');

    // each line still names its notification, by the reference an operator can compute from the id
    const failed = all.find((l) => l.msg === 'publishing provider notifications failed') as any;
    expect(failed.err.message).toBe(`no send owns provider message id ${logRef(unknown)} yet`);
    const dead = all.filter((l) => l.msg === 'provider notification dead-lettered') as any[];
    expect(dead.map((l) => l.providerMessageId).sort()).toEqual([logRef(badTime), logRef(inbound)].sort());
    expect(dead.find((l) => l.kind === 'message').reason).toBe(`inbound message ${logRef(inbound)}: timestamp 999999999999 lies after year 9999`);

    // and nothing of the customers: not in clear, not in base64
    for (const id of [unknown, badTime, inbound]) expect(text).not.toContain(id.slice(6, 30));
    for (const phone of [CUSTOMER, SENDER]) {
      expect(text).not.toContain(phone);
      expect(decodedTokens(text)).not.toContain(phone);
    }
    expect(text).not.toContain('Zoe Inbound');
    expect(text).not.toContain('private words');
  });

  it("a phone number in an error's text (a stream id, the contact upsert's give-up) and in a conversation id is masked", async () => {
    const before = raw.length;
    const conflict = new WrongExpectedRevisionError(`contactphone-${SHOP.companyId}-+5491155550199`, 3n, 4n);
    services.logger.error({ err: conflict }, 'unhandled error');
    services.logger.error({ err: new Error('upsert of +5491155550199: gave up after 100 conflicting attempts') }, 'unhandled error');
    services.logger.warn({ streamId: `conversation-${SHOP.companyId}-msgapp-${SHOP.number.phoneNumberId}-${SENDER}` }, 'a stream');
    await new Promise((ok) => setImmediate(ok));
    const text = raw.slice(before).join('');
    const got = text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    expect(got).toHaveLength(3);
    expect(got[0].err.message).toBe(`wrong expected revision on contactphone-${SHOP.companyId}-+[phone]: expected 3, actual 4`);
    expect(got[0].err.streamId).toBe(`contactphone-${SHOP.companyId}-+[phone]`);
    expect(got[1].err.message).toBe('upsert of +[phone]: gave up after 100 conflicting attempts');
    expect(got[2].streamId).toBe(`conversation-${SHOP.companyId}-msgapp-${SHOP.number.phoneNumberId}-[phone]`);
    expect(text).not.toContain('5491155550199');
    expect(text).not.toContain(SENDER);
    // what must stay: times, offsets, the business's number id, durations
    expect(got[2].streamId).toContain(SHOP.number.phoneNumberId);
    expect(typeof got[0].time).toBe('number');
  });

  it('a sent message and its statuses, at trace: no line carries the recipient, in clear or in base64', async () => {
    const before = raw.length;
    const to = '+5491155550177';
    const res = await fetch(`${base}/api/v1/platform-templates/send/`, {
      method: 'POST', headers: { 'x-api-key': SHOP.key, 'content-type': 'application/json' },
      body: JSON.stringify({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'es', recipient_phone: to }),
    });
    expect(res.status).toBe(200);
    const id = ((await res.json()) as { message_id: string }).message_id;
    expect(Buffer.from(id.slice(6), 'base64url').toString('latin1')).toContain(to.slice(3)); // the sandbox's id holds the number
    expect((await post(statusBody(SHOP.number.phoneNumberId, id, 'delivered', new Date().toISOString(), { recipientId: to.slice(1), timestamp: unix(new Date().toISOString()) }))).status).toBe(200);
    // a status for it that can never be applied (its timestamp lies after year 9999): a line naming it
    expect((await post(statusBody(SHOP.number.phoneNumberId, id, 'read', '2026-01-01T00:00:00Z', { recipientId: to.slice(1), timestamp: '99999999999999' }))).status).toBe(200);
    await waitUntil(async () => raw.slice(before).join('').includes('"msg":"provider notification dead-lettered"') || undefined, 20_000, 'the line of the unreadable status');
    const text = raw.slice(before).join('');
    expect(text).toContain(`"providerMessageId":"${logRef(id)}"`);
    expect(text).not.toContain(id);
    expect(text).not.toContain(to.slice(1));
    expect(decodedTokens(text)).not.toContain(to.slice(3));
  });
});
