import type { InProcessTransport } from '../../src/adapters/in-process/transport';
import { seedFixture } from '../../src/commands/provisioning/seed';
import type { Subscription } from '../../src/ports/transport';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { createTestApp } from '../support/services';
import { postWebhook, SHOP, sendsFixture, unix, waitUntil } from '../support/sends';

// A signed provider webhook whose inbound message cannot be stored (a NUL or a lone surrogate in its text, a
// timestamp past year 9999, a NUL in the receiving number) answers 200: that message is dead-lettered with the
// reason, and the rest of the body (other messages, statuses) is still applied.

type T = Awaited<ReturnType<typeof createTestApp>>;
const NOW = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:05.000Z';
const UNSTORABLE = 'contains text that cannot be stored (U+0000 or an unpaired UTF-16 surrogate)';

const inbound = (id: string, over: object = {}) => ({ from: '5491155551234', id, timestamp: unix(T1), type: 'text', text: { body: 'hola' }, ...over });
const change = (phoneNumberId: string, value: object) => ({
  field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '541100000031', phone_number_id: phoneNumberId }, ...value },
});

describe('provider webhook: inbound messages Postgres cannot store', () => {
  let t: T;
  let consumer: Subscription;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(NOW) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    consumer = await startDeliveryConsumer(t.services, { ownerGraceMs: 300, ownerWaitMs: 50 });
  });
  afterAll(async () => {
    await consumer?.stop();
    await t?.close();
  });

  const transport = () => t.services.transport as InProcessTransport;
  const recordedMessageIds = async () =>
    (await t.db.pool.query(`SELECT data->>'messageId' AS id FROM es.events WHERE type = 'MessageRecorded' AND data->>'direction' = 'inbound' ORDER BY id`))
      .rows.map((r) => r.id);

  it('dead-letters the unstorable messages, records the valid one and applies the status of the same body (200)', async () => {
    const send = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155550301' },
    });
    expect(send.statusCode).toBe(200);
    const providerId = send.json().message_id as string;
    const before = transport().deadLetters.length;

    const body = {
      object: 'whatsapp_business_account',
      entry: [
        { id: 'WABA', changes: [
          change(SHOP.number.phoneNumberId, { messages: [
            inbound('wamid.NUL', { text: { body: 'hola\u0000' } }),
            inbound('wamid.SURROGATE', { text: { body: 'x\uD83D' } }),
            inbound('wamid.FAR', { timestamp: '999999999999' }),
            inbound('wamid.OK'),
          ] }),
          change(`${SHOP.number.phoneNumberId}\u0000`, { messages: [inbound('wamid.BADNUMBER')] }),
        ] },
        { id: 'WABA', changes: [
          change(SHOP.number.phoneNumberId, { statuses: [{ id: providerId, status: 'delivered', timestamp: unix(T1), recipient_id: '5491155550301' }] }),
        ] },
      ],
    };
    const res = await postWebhook(t.app, body);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ received: 6 });

    expect(transport().deadLetters.slice(before).map((d) => [d.topic, d.reason])).toEqual([
      ['provider.webhooks.dlq', `inbound message "wamid.NUL": ${UNSTORABLE}`],
      ['provider.webhooks.dlq', `inbound message "wamid.SURROGATE": ${UNSTORABLE}`],
      ['provider.webhooks.dlq', 'inbound message wamid.FAR: timestamp 999999999999 lies after year 9999'],
      ['provider.webhooks.dlq', `inbound message "wamid.BADNUMBER": ${UNSTORABLE}`],
    ]);
    expect(await recordedMessageIds()).toEqual(['wamid.OK']);
    const status = async () =>
      (await t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(providerId)}/`, headers: { 'x-api-key': SHOP.key } }))
        .json().delivery_status;
    await waitUntil(async () => (await status()).current === 'delivered', 20_000, 'the delivered status');
    expect(await status()).toMatchObject({ current: 'delivered', delivered_at: T1 });

    // delivered again, the provider gets 200 again and nothing is recorded twice
    expect((await postWebhook(t.app, body)).statusCode).toBe(200);
    expect(await recordedMessageIds()).toEqual(['wamid.OK']);
  });

  it('dead-letters a status whose provider id or client reference cannot be stored, and applies the status beside it (200)', async () => {
    const send = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155550302' },
    });
    const providerId = send.json().message_id as string;
    const before = transport().deadLetters.length;
    const status = (id: string, over: object = {}) => ({ id, status: 'read', timestamp: unix(T1), recipient_id: '5491155550302', ...over });
    const res = await postWebhook(t.app, {
      object: 'whatsapp_business_account',
      entry: [{ id: 'WABA', changes: [change(SHOP.number.phoneNumberId, { statuses: [
        status('wamid.\u0000NUL'), status('wamid.REF', { biz_opaque_callback_data: 'ref\uDC00' }), status(providerId),
      ] })] }],
    });
    expect(res.statusCode).toBe(200);
    expect(transport().deadLetters.slice(before).map((d) => [d.topic, d.reason])).toEqual([
      ['provider.webhooks.dlq', `status of "wamid.\\u0000NUL": ${UNSTORABLE}`], // the reason escapes it
      ['provider.webhooks.dlq', `status of "wamid.REF": ${UNSTORABLE}`],
    ]);
    const current = async () =>
      (await t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(providerId)}/`, headers: { 'x-api-key': SHOP.key } }))
        .json().delivery_status?.current;
    await waitUntil(async () => (await current()) === 'read', 20_000, 'the read status');
  });
});
