import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CO, bulkFixture, phones } from '../support/bulk';
import { createTestApp } from '../support/services';

// Review 9: creation through the API: bad input is a 400 in the spec's {field: [messages]} shape and stores nothing
// (events, job, read model); at most 100,000 recipients; a bulk of 100,000 is created in one request (its time is
// printed, not asserted: the machine is shared).

type T = Awaited<ReturnType<typeof createTestApp>>;
const BASE = '/api/v1/platform-templates';

describe('send-bulk: validation changes nothing; 100,000 recipients at most', () => {
  let t: T;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2026-03-01T10:00:00.000Z') });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const post = (payload: unknown) =>
    t.app.inject({ method: 'POST', url: `${BASE}/send-bulk/`, headers: { 'x-api-key': BULK_CO.key }, payload: payload as object });
  const body = (recipients: unknown, over: Record<string, unknown> = {}) => ({
    phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome', recipients, ...over,
  });
  const stored = async () =>
    (await t.db.pool.query(
      `SELECT (SELECT count(*)::int FROM es.events) AS events, (SELECT count(*)::int FROM bulk_work.jobs) AS jobs,
              (SELECT count(*)::int FROM bulk_work.recipients) AS rows, (SELECT count(*)::int FROM rm_bulk.bulk_sends) AS bulks,
              (SELECT count(*)::int FROM rm_bulk.messages) AS messages`,
    )).rows[0];

  it('every bad request is a 400 {field: [messages]} and stores nothing', async () => {
    const before = await stored();
    const list = phones(3, '+54911730');
    const cases: Array<[unknown, Record<string, string[]>]> = [
      [body([]), { recipients: ['This list may not be empty.'] }],
      [body([{ phone: list[0] }, { phone: '5491173000002' }]), {
        recipients: ['recipients[1].phone: Enter the phone number in international format: a leading + and digits only, no spaces.'],
      }],
      [body([{ phone: list[0] }, { phone: list[0] }, { phone: '+12' }]), {
        recipients: ['recipients[2].phone: Enter the phone number in international format: a leading + and digits only, no spaces.'],
      }],
      [body([{ phone: list[0], variables: { name: 'Ana' } }], { template_name: 'order_update' }), {
        recipients: ['recipients[0].button_variables: \'button_0\' is required: button 0 is a URL button with a dynamic suffix.'],
      }],
      [body([{ phone: list[0], variables: { nombre: 'Ana' } }]), {
        recipients: ['recipients[0].variables: Unknown variable \'nombre\': the template has no such variable.'],
      }],
      [body(phones(100_001, '+5491174').map((phone) => ({ phone }))), { recipients: ['Ensure this field has no more than 100000 elements.'] }],
    ];
    for (const [payload, expected] of cases) {
      const res = await post(payload);
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 400, body: expected });
    }
    expect(await stored()).toEqual(before);
  });

  it('one person under two spellings that normalize alike (a trunk 0, Argentina\'s 15) is one recipient', async () => {
    const res = await post(body([
      { phone: '+5491155551234' }, { phone: '+54111555551234' }, { phone: '+447911123456' }, { phone: '+4407911123456' }, { phone: '+4915112345678' },
    ]));
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ total_recipients: 5, unique_recipients: 3 });
  });

  it('creates a bulk of 100,000 recipients with variables in one request', async () => {
    const recipients = phones(100_000, '+5491175').map((phone, i) => ({ phone, variables: { name: `Cliente ${i}` }, button_variables: { button_0: `A${i}` } }));
    const payload = JSON.stringify(body(recipients, { template_name: 'order_update' }));
    const started = Date.now();
    const res = await t.app.inject({
      method: 'POST', url: `${BASE}/send-bulk/`, headers: { 'x-api-key': BULK_CO.key, 'content-type': 'application/json' }, payload,
    });
    const ms = Date.now() - started;
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ total_recipients: 100_000, unique_recipients: 100_000, status: 'queued' });
    console.log(`send-bulk of 100,000 recipients (${(payload.length / 1e6).toFixed(1)} MB): 202 in ${ms} ms`);
    const detail = await t.app.inject({ method: 'GET', url: `${BASE}/bulk-sends/${res.json().bulk_send_id}/`, headers: { 'x-api-key': BULK_CO.key } });
    expect(detail.json()).toMatchObject({ status: 'QUEUED', total_recipients: 100_000, pending_count: 100_000 });
  });
});
