import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import type { SendTemplateInput } from '../../src/commands/send/handler';
import { sendTemplate } from '../../src/commands/send/send-template';
import { keyedSendId } from '../../src/commands/send/keyed';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { type MessagingProvider, ProviderError, type SendTemplateRequest, type SendTemplateResult } from '../../src/ports/provider';
import type { Subscription } from '../../src/ports/transport';
import { requestFingerprint } from '../../src/http/idempotency';
import { sendBodySchema } from '../../src/http/routes/sends';
import { LEASE_MS } from '../../src/shared/idempotency-key';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { createTestApp } from '../support/services';
import { eventsOf, eventually, postWebhook, SHOP, sendsFixture, statusBody } from '../support/sends';

// Keyed single sends that lost their answer (docs/sends.md, "Idempotent sends"): a process that dies after the
// provider accepted leaves the request alone in the send's stream. The first attempt is run as the command with a
// provider double that never answers (the process is gone); retries go through the HTTP route with the same key.

type T = Awaited<ReturnType<typeof createTestApp>>;
const SEND = '/api/v1/platform-templates/send/';
const START = Date.parse('2026-03-01T10:00:00.000Z');
const body = { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155551234' };

class ProviderDouble implements MessagingProvider {
  readonly kind = 'test' as const;
  readonly calls: SendTemplateRequest[] = [];
  /**
   * what the next calls do: answer (sandbox), never answer (the process died meanwhile), fail retryably, or accept
   * the message and then time out or lose the connection before the answer arrives (the caller cannot tell)
   */
  mode: 'answer' | 'hang' | 'fail' | 'accept-then-timeout' | 'accept-then-crash' = 'answer';
  /** the provider's id of the last message accepted */
  accepted: string | undefined;
  private readonly sandbox = new SandboxProvider({ delivery: 'off' });

  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    this.calls.push(request);
    if (this.mode === 'hang') return new Promise<never>(() => {});
    if (this.mode === 'fail') throw new ProviderError('http_503', 'provider answered HTTP 503', true, { httpStatus: 503, attempts: 3 });
    const result = await this.sandbox.sendTemplate(request);
    this.accepted = result.providerMessageId;
    if (this.mode === 'accept-then-timeout') throw new ProviderError('timeout', 'provider did not answer within 10000 ms', true, { attempts: 1 });
    if (this.mode === 'accept-then-crash') throw new TypeError('socket hang up');
    return result;
  }
}

describe('keyed single sends: reconciliation and retries after a crash', () => {
  let t: T;
  let consumer: Subscription;
  const provider = new ProviderDouble();
  let clock = START;

  beforeAll(async () => {
    t = await createTestApp({ provider, now: () => new Date(clock) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    consumer = await startDeliveryConsumer(t.services, { ownerGraceMs: 300, ownerWaitMs: 50 });
  });
  afterAll(async () => {
    await consumer?.stop();
    await t?.close();
  });
  beforeEach(() => {
    provider.calls.length = 0;
    provider.mode = 'answer';
  });

  const send = (key: string) =>
    t.app.inject({ method: 'POST', url: SEND, headers: { 'x-api-key': SHOP.key, 'idempotency-key': key }, payload: body });
  const statusRecord = async (id: string) =>
    (await t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${id}/`, headers: { 'x-api-key': SHOP.key } })).json();
  const outboundMessages = async (providerId: string) =>
    (await t.db.pool.query(`SELECT data FROM es.events WHERE type = 'MessageRecorded' AND data->>'messageId' = $1`, [providerId])).rows.map((r) => r.data);

  /** The first attempt, run until the provider has the message; its process then "dies" (the call never returns). */
  const crashAfterProviderCall = async (key: string) => {
    provider.mode = 'hang';
    const input: SendTemplateInput = {
      companyId: SHOP.companyId, actor: 'key-1', phoneNumberId: body.phone_number_id, templateName: 'welcome', language: 'es',
      recipientPhone: body.recipient_phone, variables: {}, buttonVariables: {}, idempotency: { key, fingerprint: requestFingerprint('POST', SEND, {}, sendBodySchema.parse(body)) },
    };
    void sendTemplate(t.services, input);
    await eventually(async () => provider.calls.length, 1);
    expect(provider.calls).toHaveLength(1);
    provider.mode = 'answer';
    return keyedSendId(SHOP.companyId, key, 0);
  };

  it('a status naming an unanswered keyed send records the acceptance and the status; the retry answers it without a provider call', async () => {
    clock = START;
    const sendId = await crashAfterProviderCall('order-1001');
    expect(provider.calls[0].clientReference).toBe(sendId);
    expect((await eventsOf(t.db.pool, `send-${sendId}`)).map((e) => e.type)).toEqual(['TemplateSendRequested']);

    // younger than the lease the request counts as in flight (409 after the wait: test/api/idempotency.test.ts)
    clock = START + LEASE_MS;
    const unknown = await send('order-1001');
    expect(unknown.statusCode).toBe(503);
    expect(unknown.headers['retry-after']).toBe('5');
    expect(unknown.json()).toEqual({
      error: 'The first attempt with this Idempotency-Key reached the provider but its outcome is not known yet; retry later.',
    });
    expect(provider.calls).toHaveLength(1);

    const wamid = 'wamid.CRASHED0001';
    const sentAt = '2026-03-01T10:00:02.000Z';
    const deliveredAt = '2026-03-01T10:00:09.000Z';
    const sent = statusBody(SHOP.number.phoneNumberId, wamid, 'sent', sentAt, { clientReference: sendId });
    expect((await postWebhook(t.app, sent)).statusCode).toBe(200);
    expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, wamid, 'delivered', deliveredAt, { clientReference: sendId }))).statusCode).toBe(200);

    const expected = {
      id: expect.any(Number),
      template: { id: 3102, name: 'welcome', language: 'es', category: 'MARKETING' },
      recipient: { phone: '+5491155551234', contact_name: SHOP.contact.fullName, contact_id: SHOP.contact.id }, // a phone variant of the contact
      variables_used: {},
      delivery_status: {
        current: 'delivered', sent_at: sentAt, delivered_at: deliveredAt, read_at: null, failed_at: null, error_code: null, error_message: null,
      },
      meta_message_id: wamid,
      was_successful: true,
      error_message: null,
      sent_at: sentAt,
    };
    const record = await eventually(async () => (await statusRecord(wamid)).delivery_status?.current, 'delivered');
    expect(record).toBe('delivered');
    expect(await statusRecord(wamid)).toEqual(expected);

    const retried = await send('order-1001');
    expect(retried.statusCode).toBe(200);
    expect(retried.headers['idempotent-replayed']).toBe('true'); // the crashed request's outcome, as recorded
    expect(retried.json()).toEqual({
      success: true, message_id: wamid, template_name: 'welcome', recipient_phone: '+5491155551234', status: 'sent', sent_at: sentAt,
    });
    expect(provider.calls).toHaveLength(1);

    // the chat history (export) has the outbound message once, as the send path records it
    expect(await outboundMessages(wamid)).toEqual([expect.objectContaining({
      companyId: SHOP.companyId, messageId: wamid, direction: 'outbound', occurredAt: sentAt,
    })]);

    // a redelivered status changes nothing (the in-process transport has handled a record when publish returns)
    const before = await eventsOf(t.db.pool, `send-${sendId}`);
    expect(before.map((e) => e.type)).toEqual(['TemplateSendRequested', 'TemplateSendAccepted', 'DeliveryStatusRecorded']);
    expect((await postWebhook(t.app, sent)).statusCode).toBe(200);
    expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, wamid, 'delivered', deliveredAt, { clientReference: sendId }))).statusCode).toBe(200);
    expect(await eventsOf(t.db.pool, `send-${sendId}`)).toEqual(before);
    expect(await outboundMessages(wamid)).toHaveLength(1);
    expect(await statusRecord(wamid)).toEqual(expected);
  });

  it('without a status the retry answers 503 until the bound, then records the send interrupted and answers that', async () => {
    clock = START;
    const sendId = await crashAfterProviderCall('order-1002');
    clock = START + 9 * 60_000;
    const early = await send('order-1002');
    expect(early.statusCode).toBe(503);
    expect(early.headers['retry-after']).toBe('5');

    clock = START + 10 * 60_000;
    const late = await send('order-1002');
    expect(late.statusCode).toBe(422);
    expect(late.headers['idempotent-replayed']).toBeUndefined(); // this request recorded the interruption
    expect(late.json()).toEqual({
      error: 'The first attempt with this Idempotency-Key was interrupted, outcome unknown: no status arrived from the provider.',
    });
    expect(provider.calls).toHaveLength(1);
    const events = await eventsOf(t.db.pool, `send-${sendId}`);
    expect(events.map((e) => e.type)).toEqual(['TemplateSendRequested', 'TemplateSendRejected']);
    expect(events[1].data).toEqual({
      sendId, companyId: SHOP.companyId, code: 'interrupted', message: 'interrupted, outcome unknown', retryable: false,
      rejectedAt: new Date(START + 10 * 60_000).toISOString(),
      // the outcome is unknown: the request's number, recipient and time, for the quota (docs/sends.md, "Quota gate")
      numberId: (events[0].data as { numberId: number }).numberId, recipientE164: '+5491155551234', requestedAt: (events[0].data as { requestedAt: string }).requestedAt,
    });

    const replay = await send('order-1002');
    expect(replay.statusCode).toBe(422);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual(late.json());
    expect(provider.calls).toHaveLength(1);
  });

  it.each([
    ['a timeout', 'accept-then-timeout', 'The provider did not answer (timeout)'],
    ['an unclassified failure', 'accept-then-crash', 'The provider did not answer (provider_error)'],
  ] as const)('%s after the provider may have taken the message: 503 outcome unknown, no second provider call; its first status answers the retry', async (_what, mode, said) => {
    clock = START;
    const key = `order-${mode}`;
    provider.mode = mode;
    const first = await send(key);
    expect(first.statusCode).toBe(503);
    expect(first.headers['retry-after']).toBe('5');
    expect(first.json()).toEqual({ error: `${said}: the message may have been sent. Retry with the same Idempotency-Key later to learn its outcome.` });
    const sendId = keyedSendId(SHOP.companyId, key, 0);
    expect((await eventsOf(t.db.pool, `send-${sendId}`)).map((e) => e.type)).toEqual(['TemplateSendRequested']);

    provider.mode = 'answer';
    clock = START + LEASE_MS; // past the in-flight window: the repeat answers at once
    const repeat = await send(key);
    expect(repeat.statusCode).toBe(503);
    expect(repeat.json()).toEqual({ error: 'The first attempt with this Idempotency-Key reached the provider but its outcome is not known yet; retry later.' });
    expect(provider.calls).toHaveLength(1);

    const wamid = provider.accepted!;
    expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, wamid, 'sent', '2026-03-01T10:00:01.000Z', { clientReference: sendId }))).statusCode).toBe(200);
    const answered = await eventually(async () => (await send(key)).statusCode, 200);
    expect(answered).toBe(200);
    const replay = await send(key);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toMatchObject({ success: true, message_id: wamid, status: 'sent' });
    expect(provider.calls).toHaveLength(1);
  });

  it('a retryable provider failure lets the next retry make a new attempt, with its own send id', async () => {
    clock = START;
    provider.mode = 'fail';
    const failed = await send('order-1003');
    expect(failed.statusCode).toBe(502);
    expect(provider.calls).toHaveLength(1);

    provider.mode = 'answer';
    const retried = await send('order-1003');
    expect(retried.statusCode).toBe(200);
    expect(provider.calls.map((c) => c.clientReference)).toEqual([keyedSendId(SHOP.companyId, 'order-1003', 0), keyedSendId(SHOP.companyId, 'order-1003', 1)]);

    const again = await send('order-1003');
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(retried.json());
    expect(provider.calls).toHaveLength(2);
  });
});
