import { seedFixture } from '../../src/commands/provisioning/seed';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, RecordingProvider, sandbox, waitForBulk } from '../support/bulk';
import { createTestApp } from '../support/services';

// Review of bulk sends (2026-11-27): one messaging number spelled two ways in `recipients` (Argentina's `+549…` and
// the provider's `+54…`, Mexico's `+521…` and `+52…`) is a duplicate phone: it is sent once, not twice; and a
// recipient already sent to in the quota window uses no quota whichever way it is spelled (docs/bulk.md, "Creation").

const BASE = '/api/v1/platform-templates';
const T0 = new Date('2026-03-01T10:00:00.000Z');

describe('send-bulk: one number spelled two ways', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => T0 });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const post = (url: string, payload: unknown) =>
    t.app.inject({ method: 'POST', url, headers: { 'x-api-key': BULK_CO.key }, payload: payload as object });
  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': BULK_CO.key } });

  it('removes a repeated number written in its other form; the first spelling is kept and sent once', async () => {
    const submitted = ['+5491155550001', '+541155550001', '+5491155550002', '+5215512345678', '+525512345678', '+541155550001', '+14155552671'];
    const res = await post(`${BASE}/send-bulk/`, {
      phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome', recipients: submitted.map((phone) => ({ phone })),
    });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ total_recipients: 7, unique_recipients: 4, quota_info: { quota_needed: 4 } });
    const bulkId: string = res.json().bulk_send_id;

    const provider = new RecordingProvider(sandbox(), () => T0);
    const dispatcher = new BulkDispatcher(t.services, { pollMs: 20, sleep: async () => undefined, provider });
    dispatcher.start();
    try {
      await waitForBulk(t.db.pool, BULK_CO.companyId, bulkId, (b) => b.status === 'COMPLETED');
    } finally {
      await dispatcher.stop();
    }
    expect(provider.calls.map((c) => c.to)).toEqual(expect.arrayContaining(['+5491155550001', '+5491155550002', '+5215512345678', '+14155552671']));
    expect(provider.calls).toHaveLength(4);
    expect((await get(`${BASE}/bulk-sends/${bulkId}/`)).json()).toMatchObject({ total_recipients: 4, sent_count: 4, pending_count: 0 });
    const messages = (await get(`${BASE}/bulk-sends/${bulkId}/messages/`)).json();
    expect(messages.results.map((m: { recipient_phone: string }) => m.recipient_phone))
      .toEqual(['+5491155550001', '+5491155550002', '+5215512345678', '+14155552671']);
  });

  it('quota_needed does not count a recipient already sent to in the window under its other spelling', async () => {
    const single = await post(`${BASE}/send/`, {
      phone_number_id: BULK_CO.quota.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155556001',
    });
    expect(single.statusCode).toBe(200);
    // the accounts read model shows the single send's quota use (read-your-writes of the send)
    expect((await get('/api/v1/business-accounts/')).json().phoneNumbers
      .find((n: { phoneNumberId: string }) => n.phoneNumberId === BULK_CO.quota.phoneNumberId).quota.uniqueNumbersSent24h).toBe(1);

    const res = await post(`${BASE}/send-bulk/`, {
      phone_number_id: BULK_CO.quota.phoneNumberId, template_name: 'welcome',
      recipients: [{ phone: '+541155556001' }, { phone: '+5491155556002' }],
    });
    expect(res.statusCode).toBe(202);
    expect(res.json().quota_info).toEqual({ can_send: true, quota_needed: 1, quota_available: 49, quota_total: 50, tier: 'TIER_50' });
    expect((await post(`${BASE}/bulk-sends/${res.json().bulk_send_id}/cancel/`, undefined)).statusCode).toBe(200);
  });
});
