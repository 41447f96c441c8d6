import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CO, BULK_OTHER, bulkFixture } from '../support/bulk';
import { createTestApp } from '../support/services';
import { postWebhook, statusBody, waitUntil } from '../support/sends';
import { startReceiver, startWebhookPipeline } from '../support/webhook-receiver';

// The webhook event catalogue beyond single sends (docs/webhooks.md): bulk messages' sent / failed / delivered /
// read with bulk_send_id, bulk_send.started and bulk_send.completed with the final counters, contact.upserted
// with the fields that got new versions. Real app, Postgres, consumer, dispatcher, fan-out, sender and receiver.

const BASE = '/api/v1/webhook-endpoints/';
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';
const PLAN_FIELD = { id: 9501, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold'], required: false, group: null };

describe('webhook event types', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let pipeline: Awaited<ReturnType<typeof startWebhookPipeline>> | undefined;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    const fixture = bulkFixture();
    fixture.companies[0].contactLists[0].customFields = [PLAN_FIELD];
    await seedFixture(t.services, fixture, { actor: 'test' });
    pipeline = await startWebhookPipeline(t.services);
    receiver = pipeline.receiver;
  });
  afterAll(async () => {
    await pipeline?.stop();
    await t?.close();
  });

  const api = (method: 'GET' | 'POST', url: string, body?: unknown, key = BULK_CO.key) =>
    t.app.inject({ method, url, headers: { 'x-api-key': key }, ...(body === undefined ? {} : { payload: body as object }) });
  const register = async (path: string, eventTypes: string[], key = BULK_CO.key) => {
    const res = await api('POST', BASE, { url: receiver.url(path), event_types: eventTypes }, key);
    expect(res.statusCode).toBe(201);
  };
  const bodies = (path: string) => receiver.received.filter((r) => r.path === path).map((r) => JSON.parse(r.body));

  it('bulk sends: started, each message sent or failed with bulk_send_id, its statuses, completed with the final counters', async () => {
    await register('/bulk', ['message.sent', 'message.delivered', 'message.read', 'message.failed', 'bulk_send.started', 'bulk_send.completed']);
    await register('/bulk-other', ['message.sent', 'bulk_send.started', 'bulk_send.completed'], BULK_OTHER.key);
    const created = await api('POST', '/api/v1/platform-templates/send-bulk/', {
      phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome',
      recipients: [{ phone: '+5491155550011' }, { phone: '+5491155550021' }, { phone: '+5491155550000' }], // ...0000: the sandbox refuses it
    });
    expect(created.statusCode).toBe(202);
    const bulkId = created.json().bulk_send_id as string;
    const completed = await waitUntil(async () => bodies('/bulk').find((b) => b.type === 'bulk_send.completed'), 20_000, 'bulk_send.completed');
    await waitUntil(async () => bodies('/bulk').filter((b) => b.type === 'message.sent').length === 2, 20_000, 'two message.sent');

    const detail = (await api('GET', `/api/v1/platform-templates/bulk-sends/${bulkId}/`)).json();
    expect(bodies('/bulk').find((b) => b.type === 'bulk_send.started')).toEqual({
      type: 'bulk_send.started', timestamp: expect.any(String), data: { bulk_send_id: bulkId, status: 'PROCESSING', started_at: expect.any(String) },
    });
    expect(completed).toEqual({
      type: 'bulk_send.completed', timestamp: expect.any(String),
      data: {
        bulk_send_id: bulkId, status: detail.status, completed_at: expect.any(String), total_recipients: 3, dispatched_count: 2, rejected_count: 1,
        sent_count: 2, delivered_count: 0, read_count: 0, failed_count: 1, pending_count: 0,
      },
    });
    const sent = bodies('/bulk').filter((b) => b.type === 'message.sent').sort((a, b) => a.data.recipient_phone.localeCompare(b.data.recipient_phone));
    expect(sent.map((b) => b.data)).toEqual(['+5491155550011', '+5491155550021'].map((phone) => ({
      bulk_send_id: bulkId, id: expect.any(Number), recipient_phone: phone, meta_message_id: expect.any(String), variables_used: {},
      status: 'sent', sent_at: expect.any(String), delivered_at: null, read_at: null, error_message: null,
    })));
    const failed = await waitUntil(async () => bodies('/bulk').find((b) => b.type === 'message.failed'), 20_000, 'message.failed');
    expect(failed.data).toMatchObject({ bulk_send_id: bulkId, recipient_phone: '+5491155550000', meta_message_id: null, status: 'failed', error_message: expect.any(String) });

    // the provider's statuses for the two dispatched messages: delivered + read for one, failed for the other
    const [a, b] = sent.map((s) => s.data.meta_message_id as string);
    for (const [id, s, at] of [[a, 'delivered', T1], [a, 'read', T2], [b, 'failed', T1]] as const) {
      expect((await postWebhook(t.app, statusBody(BULK_CO.unlimited.phoneNumberId, id, s, at))).statusCode).toBe(200);
    }
    await waitUntil(async () => bodies('/bulk').filter((x) => x.data.meta_message_id === a || x.data.meta_message_id === b).length === 5, 20_000, 'the status webhooks');
    await new Promise((r) => setTimeout(r, 300)); // nothing more arrives
    const page = (await api('GET', `/api/v1/platform-templates/bulk-sends/${bulkId}/messages/?page_size=10`)).json();
    const item = page.results.find((m: { meta_message_id: string }) => m.meta_message_id === a);
    const read = bodies('/bulk').find((x) => x.type === 'message.read');
    expect(read.data).toEqual({ ...item, bulk_send_id: bulkId }); // the bulk message item, plus bulk_send_id
    // one webhook per transition the record shows, even where the bulk log holds a change twice (an implied delivered)
    expect(bodies('/bulk').filter((x) => x.data.meta_message_id === a).map((x) => [x.type, x.data.delivered_at, x.data.read_at]).sort())
      .toEqual([['message.delivered', T1, null], ['message.read', T1, T2], ['message.sent', null, null]]);
    expect(bodies('/bulk').filter((x) => x.type === 'message.failed' && x.data.meta_message_id === b)).toEqual([
      { type: 'message.failed', timestamp: expect.any(String), data: expect.objectContaining({ bulk_send_id: bulkId, status: 'failed', meta_message_id: b }) },
    ]);
    expect(bodies('/bulk-other')).toEqual([]); // another company's endpoint
  });

  it("a bulk message.failed carries the bulk message item's error_message: the provider's code when it gave no message, else 'failed'", async () => {
    await register('/bulk-failed', ['message.sent', 'message.failed']);
    const created = await api('POST', '/api/v1/platform-templates/send-bulk/', {
      phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome', recipients: [{ phone: '+5491155550031' }, { phone: '+5491155550041' }],
    });
    expect(created.statusCode).toBe(202);
    const bulkId = created.json().bulk_send_id as string;
    const sent = await waitUntil(async () => {
      const s = bodies('/bulk-failed').filter((b) => b.type === 'message.sent');
      return s.length === 2 && s.sort((x, y) => x.data.recipient_phone.localeCompare(y.data.recipient_phone));
    }, 20_000, 'two message.sent');
    const [coded, bare] = sent.map((s) => s.data.meta_message_id as string);
    const codeOnly = { errors: [{ code: 131026 } as { code: number; title: string }] }; // no message, title or details
    expect((await postWebhook(t.app, statusBody(BULK_CO.unlimited.phoneNumberId, coded, 'failed', T1, codeOnly))).statusCode).toBe(200);
    expect((await postWebhook(t.app, statusBody(BULK_CO.unlimited.phoneNumberId, bare, 'failed', T1))).statusCode).toBe(200);
    const failed = await waitUntil(async () => {
      const f = bodies('/bulk-failed').filter((b) => b.type === 'message.failed');
      return f.length === 2 && f;
    }, 20_000, 'two message.failed');
    const page = (await api('GET', `/api/v1/platform-templates/bulk-sends/${bulkId}/messages/?page_size=10`)).json();
    const itemOf = (id: string) => page.results.find((m: { meta_message_id: string }) => m.meta_message_id === id);
    expect([itemOf(coded).error_message, itemOf(bare).error_message]).toEqual(['provider error 131026', 'failed']);
    for (const id of [coded, bare]) expect(failed.find((b) => b.data.meta_message_id === id).data).toEqual({ ...itemOf(id), bulk_send_id: bulkId });
  });

  it('contact.upserted names the custom fields that got new versions', async () => {
    await register('/contacts', ['contact.upserted']);
    const upsert = (body: unknown) => api('POST', '/api/v1/external/contacts/upsert/', body);
    const first = await upsert({ phone: '+5491166660001', full_name: 'Lia', custom_fields: [{ key: 'plan', value: ['basic'] }] });
    expect(first.statusCode).toBe(201);
    const contactId = first.json().contact.id ?? first.json().id;
    await waitUntil(async () => bodies('/contacts').length === 1, 20_000, 'the first contact.upserted');
    expect((await upsert({ phone: '+5491166660001', custom_fields: [{ key: 'plan', value: ['gold'] }] })).statusCode).toBe(200);
    await waitUntil(async () => bodies('/contacts').length === 2, 20_000, 'the second contact.upserted');
    const [created, changed] = bodies('/contacts');
    expect(created).toEqual({
      type: 'contact.upserted', timestamp: expect.any(String),
      data: { contact_id: contactId, created: true, profile_changed: true, versioned_custom_fields: [{ custom_field_id: PLAN_FIELD.id, key: 'plan', version: 1, value: ['basic'] }] },
    });
    expect(changed.data).toEqual({
      contact_id: contactId, created: false, profile_changed: false, versioned_custom_fields: [{ custom_field_id: PLAN_FIELD.id, key: 'plan', version: 2, value: ['gold'] }],
    });
  });
});
