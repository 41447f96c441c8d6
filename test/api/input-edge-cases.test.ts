import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CO, bulkFixture } from '../support/bulk';
import { issueKey, messageRecord, ndjson, provisionCompany, recordMessages, settle } from '../support/conversation-fixtures';
import { createTestApp } from '../support/services';
import { KEY_101, provisionAll, testClock } from '../integration/contacts-support';

// Client input at the edges of what JavaScript and Postgres can hold (docs/export.md, docs/bulk.md,
// docs/contacts.md, notes of 2026-11-27): names of Object.prototype's members as choices or fields, instants
// outside year 1 to 9999 in UTC, a page whose offset overflows. Each is a 4xx in the endpoint's own error shape,
// never a 500, and changes nothing.

type T = Awaited<ReturnType<typeof createTestApp>>;
const OBJECT_MEMBERS = ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__'];

describe('export: channel and from/to edges', () => {
  const GLOBAL = 'sbk_global_edgecases00000000000000000';
  const NINETY_NINE = messageRecord({ companyId: 131, id: 'edge-1999', occurredAt: '1999-01-10T10:00:00.000Z' });
  let t: T;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2024-02-01T00:00:00.000Z') });
    await provisionCompany(t.services, { companyId: 131 });
    await issueKey(t.services, GLOBAL, null);
    await settle(t.services);
    await recordMessages(t.services, [NINETY_NINE]);
    await settle(t.services);
  });
  afterAll(async () => {
    await t?.close();
  });

  const exportPage = (query: Record<string, string>) =>
    t.app.inject({ method: 'GET', url: '/api/v1/qualitative-export/messages', query: { company_id: '131', ...query }, headers: { 'x-api-key': GLOBAL } });
  const JAN_1999 = { from: '1999-01-01', to: '1999-01-15' };

  const expectInvalid = (res: Awaited<ReturnType<typeof exportPage>>, message: string) => {
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: { code: 'INVALID_PARAMETER', message } });
  };

  it.each(OBJECT_MEMBERS)('channel=%s is an unknown channel: 400 INVALID_PARAMETER', async (channel) => {
    expectInvalid(await exportPage({ ...JAN_1999, channel }), 'channel must be one of msgapp, photoapp, socialmsg, all');
  });

  it.each([
    ['from and to in year 0', { from: '0000-01-01', to: '0000-01-15' }, 'from'],
    ['from before year 1 in UTC', { from: '0001-01-01T00:00:00+01:00', to: '0001-01-15' }, 'from'],
  ])('%s: 400 naming the parameter', async (_what, range, name) => {
    expectInvalid(await exportPage(range), `${name} must be an instant from year 0001 to 9999 (UTC)`);
  });

  it('to may be the last storable instant; an hour later (year 10000 in UTC) is a 400 naming to', async () => {
    const last = await exportPage({ from: '9999-12-25', to: '9999-12-31T23:59:59.999Z' });
    expect(last.statusCode).toBe(200);
    expect(last.body).toBe('');
    expectInvalid(await exportPage({ from: '9999-12-25', to: '9999-12-31T23:00:00-05:00' }), 'to must be an instant from year 0001 to 9999 (UTC)');
  });

  it('years 0001-0099 are read as written, not as 1900-1999', async () => {
    const in1999 = await exportPage(JAN_1999);
    expect(ndjson(in1999.body)).toHaveLength(1);
    for (const range of [{ from: '0099-01-01', to: '0099-01-15' }, { from: '0001-01-01T00:00:00Z', to: '0001-01-15' }]) {
      const res = await exportPage(range);
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe('');
    }
  });
});

describe('bulk list and messages: page and date edges', () => {
  const BASE = '/api/v1/platform-templates';
  let t: T;
  let bulkId = '';

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2026-03-01T10:00:00.000Z') });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
    const created = await t.app.inject({
      method: 'POST', url: `${BASE}/send-bulk/`, headers: { 'x-api-key': BULK_CO.key },
      payload: { phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome', recipients: [{ phone: '+5491155550001' }] },
    });
    expect(created.statusCode).toBe(202);
    bulkId = created.json().bulk_send_id;
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': BULK_CO.key } });
  const HUGE_PAGES = ['1000000000000000000', `1${'0'.repeat(30)}`];

  it.each(HUGE_PAGES)('list page=%s is past the last page: 404 {detail}', async (page) => {
    const res = await get(`${BASE}/bulk-sends/?page=${page}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ detail: 'Invalid page.' });
  });

  it.each(HUGE_PAGES)('messages page=%s is past the last page: 404 {detail}; an unknown bulk send stays "not found"', async (page) => {
    const res = await get(`${BASE}/bulk-sends/${bulkId}/messages/?page=${page}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ detail: 'Invalid page.' });
    const unknown = await get(`${BASE}/bulk-sends/00000000-0000-4000-8000-000000000000/messages/?page=${page}`);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ detail: 'Bulk send not found.' });
  });

  it.each(['created_after', 'created_before'])('%s=0000-01-01 is outside the storable years: 400 {field: [message]}; 0001-01-01 and 9999-12-31 are days', async (name) => {
    const res = await get(`${BASE}/bulk-sends/?${name}=0000-01-01`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ [name]: ['Enter a date from 0001-01-01 to 9999-12-31.'] });
    const edges = await get(`${BASE}/bulk-sends/?created_after=0001-01-01&created_before=9999-12-31`);
    expect(edges.statusCode).toBe(200);
    expect(edges.json().results.map((b: { id: string }) => b.id)).toContain(bulkId);
  });
});

describe('contact upsert: field names and instant edges', () => {
  const URL_UPSERT = '/api/v1/external/contacts/upsert/';
  const clock = testClock('2026-03-01T12:00:00.000Z');
  let t: T;
  let seq = 0;
  const freshPhone = () => `+549116100${String(10000 + ++seq).slice(1)}`;

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
  });
  afterAll(async () => {
    await t?.close();
  });

  const upsert = (payload: object) => t.app.inject({ method: 'POST', url: URL_UPSERT, headers: { 'x-api-key': KEY_101 }, payload });
  const found = async (phone: string) =>
    (await t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } })).json().found;

  it.each([
    ['toString', 'unknown field "toString"'],
    ['constructor', 'unknown field "constructor"'],
    ['valueOf', 'unknown field "valueOf"'],
    ['hasOwnProperty', 'field "hasOwnProperty" is protected and cannot be set through the API'],
  ])('an extra field %s is refused like any unknown field: 400, nothing saved', async (name, message) => {
    const phone = freshPhone();
    const res = await upsert({ phone, full_name: 'Ana', [name]: 'x' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: message });
    expect(await found(phone)).toBe(false);
  });

  it.each(['9999-12-31T23:59:59-05:00', '0001-01-01T00:00:00+01:00'])(
    'expires_at %s falls outside year 1 to 9999 in UTC: 400 naming it, nothing saved; the last storable instant is valid',
    async (expiresAt) => {
      const phone = freshPhone();
      const res = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['gold'], expires_at: expiresAt }] });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'custom_fields[0].expires_at must be an instant from year 0001 to 9999 (UTC)' });
      expect(await found(phone)).toBe(false);
      const last = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['gold'], expires_at: '9999-12-31T23:59:59.999Z' }] });
      expect(last.statusCode).toBe(201);
      expect(last.json().contact.customFields[0]).toMatchObject({ key: 'plan', expires_at: '9999-12-31T23:59:59.999Z' });
    },
  );

  it.each(['9999-12-31T23:59:59-05:00', '0000-06-01T00:00:00Z'])('a datetime value %s outside the storable years: 400, nothing saved', async (value) => {
    const phone = freshPhone();
    const res = await upsert({ phone, custom_fields: [{ key: 'last_purchase', value: [value] }] });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'custom_fields[0] ("last_purchase"): value must be an instant from year 0001 to 9999 (UTC)' });
    expect(await found(phone)).toBe(false);
  });
});
