import type { InProcessTransport } from '../../src/adapters/in-process/transport';
import { seedFixture } from '../../src/commands/provisioning/seed';
import type { IncomingRecord, Subscription } from '../../src/ports/transport';
import { PROVIDER_WEBHOOK_TOPIC, signWebhook } from '../../src/shared/provider-webhook';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { createTestApp } from '../support/services';
import {
  APP_SECRET, countEventsOfType, eventsOf, eventually, postWebhook, SHOP, sendsFixture, statusBody, unix, VERIFY_TOKEN, waitUntil,
} from '../support/sends';

// Webhook ingress (handshake, signature, split + publish) and the delivery consumer on the in-process transport.

type T = Awaited<ReturnType<typeof createTestApp>>;
const NOW = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';

describe('provider webhooks (in-process transport)', () => {
  let t: T;
  let consumer: Subscription;
  const seen: IncomingRecord[] = [];

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(NOW) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    await t.services.transport.subscribe(PROVIDER_WEBHOOK_TOPIC, async (r) => { seen.push(r); }, { groupId: 'test-spy' });
    consumer = await startDeliveryConsumer(t.services, { ownerGraceMs: 300, ownerWaitMs: 50 });
  });
  afterAll(async () => {
    await consumer?.stop();
    await t?.close();
  });
  beforeEach(() => {
    seen.length = 0;
  });

  const transport = () => t.services.transport as InProcessTransport;
  const sendWelcome = async (recipient: string) => {
    const res = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: recipient },
    });
    expect(res.statusCode).toBe(200);
    return res.json().message_id as string;
  };
  const status = async (id: string) =>
    (await t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, headers: { 'x-api-key': SHOP.key } })).json();
  const streamOf = async (providerId: string) =>
    (await t.db.pool.query(`SELECT stream_id FROM es.events WHERE type = 'TemplateSendAccepted' AND data->>'providerMessageId' = $1`, [providerId])).rows[0].stream_id as string;

  describe('GET /webhooks/provider (verification handshake)', () => {
    it('answers the challenge as text for the right token', async () => {
      const res = await t.app.inject({ method: 'GET', url: `/webhooks/provider?hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1158201444` });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/plain/);
      expect(res.body).toBe('1158201444');
    });
    it.each([
      ['a wrong token', `hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1`],
      ['a prefix of the token', `hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN.slice(0, -1)}&hub.challenge=1`],
      ['the token and more', `hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}x&hub.challenge=1`],
      ['an empty token', `hub.mode=subscribe&hub.verify_token=&hub.challenge=1`],
      ['a wrong mode', `hub.mode=unsubscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1`],
      ['no parameters', ''],
    ])('403 for %s', async (_what, qs) => {
      const res = await t.app.inject({ method: 'GET', url: `/webhooks/provider?${qs}` });
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ error: 'webhook verification failed' });
    });
  });

  describe('POST /webhooks/provider (signature)', () => {
    const body = statusBody(SHOP.number.phoneNumberId, 'wamid.SIGNATURE', 'delivered', T1);

    it('401 and nothing published for a wrong signature', async () => {
      const res = await postWebhook(t.app, body, signWebhook('another-secret', JSON.stringify(body)));
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'invalid or missing X-Hub-Signature-256' });
      expect(seen).toHaveLength(0);
    });
    it('401 and nothing published without a signature, or with a malformed one', async () => {
      for (const sig of [null, 'sha256=', 'md5=abc', `sha256=${'0'.repeat(64)}`]) {
        const res = await postWebhook(t.app, body, sig);
        expect(res.statusCode).toBe(401);
      }
      expect(seen).toHaveLength(0);
    });
    it('401 when the body was changed after signing', async () => {
      const raw = JSON.stringify(body);
      const res = await t.app.inject({
        method: 'POST', url: '/webhooks/provider', payload: raw.replace('delivered', 'read'),
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) },
      });
      expect(res.statusCode).toBe(401);
      expect(seen).toHaveLength(0);
    });
    it('400 for a signed body that is not JSON', async () => {
      const raw = 'not json';
      const res = await t.app.inject({
        method: 'POST', url: '/webhooks/provider', payload: raw,
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) },
      });
      expect(res.statusCode).toBe(400);
      expect(seen).toHaveLength(0);
    });
    it('splits statuses and messages into records keyed by provider id and sender, 200 after publishing', async () => {
      const payload = {
        object: 'whatsapp_business_account',
        entry: [{
          id: 'WABA',
          changes: [{
            field: 'messages',
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '541100000031', phone_number_id: SHOP.number.phoneNumberId },
              statuses: [
                { id: 'wamid.S1', status: 'delivered', timestamp: unix(T1), recipient_id: '5491155550101' },
                { id: 'wamid.S2', status: 'read', timestamp: unix(T1), recipient_id: '5491155550102' },
              ],
              contacts: [{ profile: { name: 'Pepe' }, wa_id: '5491155550103' }],
              messages: [{ from: '5491155550103', id: 'wamid.IN1', timestamp: unix(T1), type: 'text', text: { body: 'hola' } }],
            },
          }],
        }],
      };
      // unknown ids: the consumer dead-letters them after the (short) grace; the spy sees all three
      const res = await postWebhook(t.app, payload);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ received: 3 });
      expect(seen.map((r) => [r.key, (r.value as any).kind])).toEqual([['wamid.S1', 'status'], ['wamid.S2', 'status'], ['5491155550103', 'message']]);
      expect(seen[2].value).toEqual({
        kind: 'message', phoneNumberId: SHOP.number.phoneNumberId, displayPhoneNumber: '541100000031',
        contact: { profile: { name: 'Pepe' }, wa_id: '5491155550103' },
        message: { from: '5491155550103', id: 'wamid.IN1', timestamp: unix(T1), type: 'text', text: { body: 'hola' } },
        receivedAt: NOW,
      });
    });
  });

  describe('delivery consumer', () => {
    it('send → delivered → read: the status record shows both timestamps', async () => {
      const id = await sendWelcome('+5491155550201');
      expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, id, 'sent', NOW))).statusCode).toBe(200);
      expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, id, 'delivered', T1))).statusCode).toBe(200);
      expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, id, 'read', T2))).statusCode).toBe(200);
      // in-process: the 200 means the consumer applied the records; the read model follows the events
      const expected = { current: 'read', sent_at: NOW, delivered_at: T1, read_at: T2, failed_at: null, error_code: null, error_message: null };
      expect(await eventually(async () => (await status(id)).delivery_status, expected)).toEqual(expected);
    });

    it('read first implies delivered at the read time; the late delivered and duplicates are no-ops', async () => {
      const id = await sendWelcome('+5491155550202');
      for (const [s, at] of [['read', T2], ['read', T2], ['delivered', T1], ['delivered', T1], ['sent', NOW]] as const) {
        expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, id, s, at))).statusCode).toBe(200);
      }
      const expected = { current: 'read', sent_at: NOW, delivered_at: T2, read_at: T2, failed_at: null, error_code: null, error_message: null };
      expect(await eventually(async () => (await status(id)).delivery_status, expected)).toEqual(expected);
      const events = await eventsOf(t.db.pool, await streamOf(id));
      expect(events.map((e) => `${e.type}${e.data.status ? `:${e.data.status}` : ''}`)).toEqual([
        'TemplateSendRequested', 'TemplateSendAccepted', 'DeliveryStatusRecorded:delivered', 'DeliveryStatusRecorded:read',
      ]);
      expect(events[2].data).toMatchObject({ implied: true, at: T2 });
      expect(events[2].metadata.actor).toBe('provider');
    });

    it('failed sets failed_at with the error code and message', async () => {
      const id = await sendWelcome('+5491155550203');
      const body = statusBody(SHOP.number.phoneNumberId, id, 'failed', T1, {
        errors: [{ code: 131047, title: 'Re-engagement message', message: 'Re-engagement message', error_data: { details: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.' } }],
      });
      expect((await postWebhook(t.app, body)).statusCode).toBe(200);
      const expected = {
        current: 'failed', sent_at: NOW, delivered_at: null, read_at: null, failed_at: T1, error_code: '131047',
        error_message: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.',
      };
      expect(await eventually(async () => (await status(id)).delivery_status, expected)).toEqual(expected);
      const record = await status(id);
      expect(record.was_successful).toBe(true); // the initial send succeeded
      expect(record.error_message).toBeNull();
    });

    it('a status for an unknown provider id goes to the DLQ after the grace period; a malformed one at once', async () => {
      const before = transport().deadLetters.length;
      const res = await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, 'wamid.NOBODY', 'delivered', T1));
      // the in-process publish retries a few times; the grace (300 ms) may outlast them: either 200 (DLQ'd) or 503
      if (res.statusCode !== 200) {
        expect(res.statusCode).toBe(503);
        await new Promise((r) => setTimeout(r, 350));
        expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, 'wamid.NOBODY', 'delivered', T1))).statusCode).toBe(200);
      }
      await waitUntil(async () => transport().deadLetters.some((d) => d.record.key === 'wamid.NOBODY'), 5000, 'dead letter');
      const dl = transport().deadLetters.find((d) => d.record.key === 'wamid.NOBODY')!;
      expect(dl.topic).toBe('provider.webhooks.dlq');
      expect(dl.reason).toBe('unknown provider message id wamid.NOBODY (status delivered) after 300 ms');

      const malformed = { entry: [{ changes: [{ value: { metadata: { phone_number_id: SHOP.number.phoneNumberId }, statuses: [{ id: 'wamid.X', status: 'read', timestamp: 'yesterday' }] } }] }] };
      expect((await postWebhook(t.app, malformed)).statusCode).toBe(200);
      expect(transport().deadLetters.at(-1)!.reason).toBe('status read of wamid.X: timestamp must be unix seconds, got "yesterday"');
      expect(transport().deadLetters.length).toBeGreaterThanOrEqual(before + 2);
    });

    it('an inbound message becomes MessageRecorded with the contact matched by phone variants', async () => {
      const payload = {
        object: 'whatsapp_business_account',
        entry: [{ id: 'WABA', changes: [{ field: 'messages', value: {
          messaging_product: 'whatsapp',
          metadata: { display_phone_number: '541100000031', phone_number_id: SHOP.number.phoneNumberId },
          contacts: [{ profile: { name: 'Ana' }, wa_id: '5491155551234' }],
          messages: [{ from: '5491155551234', id: 'wamid.INBOUND1', timestamp: unix(T1), type: 'text', text: { body: 'Gracias!' }, context: { from: '541100000031', id: 'wamid.PREV' } }],
        } }] }],
      };
      expect((await postWebhook(t.app, payload)).statusCode).toBe(200);
      expect((await postWebhook(t.app, payload)).statusCode).toBe(200); // redelivered: recognised
      const r = await t.db.pool.query(`SELECT stream_id, data, metadata FROM es.events WHERE type = 'MessageRecorded' AND data->>'messageId' = 'wamid.INBOUND1'`);
      expect(r.rows).toHaveLength(1);
      expect(r.rows[0].stream_id).toBe(`conversation-${SHOP.companyId}-msgapp-${SHOP.number.phoneNumberId}-5491155551234`);
      expect(r.rows[0].data).toEqual({
        companyId: SHOP.companyId, messageId: 'wamid.INBOUND1', conversationId: `msgapp-${SHOP.number.phoneNumberId}-5491155551234`,
        occurredAt: T1, channel: 'PROVIDER_MSGAPP', direction: 'inbound', author: { type: 'contact', contactId: SHOP.contact.id },
        contactPhone: '+5491155551234', content: { type: 'text', text: 'Gracias!', mediaUrl: null, mediaMime: null },
        replyToMessageId: 'wamid.PREV', classifications: [], extractions: [], toolCalls: [], traceId: null,
      });
      expect(r.rows[0].metadata.actor).toBe('provider');
    });

    it('an inbound message to an unknown number is dead-lettered', async () => {
      const payload = { entry: [{ changes: [{ value: { metadata: { phone_number_id: '123' }, messages: [{ from: '5491155551234', id: 'wamid.LOST', timestamp: unix(T1), type: 'text', text: { body: 'x' } }] } }] }] };
      expect((await postWebhook(t.app, payload)).statusCode).toBe(200);
      expect(transport().deadLetters.at(-1)!.reason).toBe('inbound message wamid.LOST: unknown phone_number_id 123');
    });

    it('nothing was applied twice', async () => {
      const delivered = await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded');
      expect(delivered).toBe(2 + 2 + 1); // read path, read-first path, failed
    });
  });
});

describe('sandbox delivery=auto', () => {
  let t: T;
  let consumer: Subscription;
  beforeAll(async () => {
    t = await createTestApp({ env: { SANDBOX_DELIVERY: 'auto' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    consumer = await startDeliveryConsumer(t.services);
  });
  afterAll(async () => {
    await consumer?.stop();
    await t?.close();
  });

  it('emits delivered then read through the webhook path; the status record reaches read', async () => {
    const res = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155550301' },
    });
    expect(res.statusCode).toBe(200);
    const id = res.json().message_id;
    const record = await waitUntil(async () => {
      const r = (await t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${id}/`, headers: { 'x-api-key': SHOP.key } })).json();
      return r.delivery_status.current === 'read' ? r : undefined;
    }, 10_000, 'read status');
    expect(record.delivery_status.delivered_at).not.toBeNull();
    expect(record.delivery_status.read_at).not.toBeNull();
    expect(await countEventsOfType(t.db.pool, 'DeliveryStatusRecorded')).toBe(2);
  });
});
