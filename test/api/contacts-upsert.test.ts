import { seedFixtureContacts } from '../../src/commands/contact/fixture';
import { contactPhoneStreamId, contactStreamId } from '../../src/commands/contact/decider';
import { createTestApp } from '../support/services';
import {
  KEY_101, KEY_101_EXPIRED, KEY_101_REVOKED, KEY_202, KEY_303, KEY_GLOBAL, LISTS_101, type ListSpec, provisionAll, testClock,
} from '../integration/contacts-support';

// POST /api/v1/external/contacts/upsert/: every numbered rule of the spec's upsert section and every listed
// 400/401/409, each asserting the body.

const URL_UPSERT = '/api/v1/external/contacts/upsert/';
const LIST11 = LISTS_101[0];
const LIST12 = LISTS_101[1];

type FieldValue = { value?: unknown[] | null; version?: number | null; expires_at?: string | null };

/** The customFields array of a view: every field of the list, `values` overriding the empty ones. */
function fieldsOf(list: ListSpec, values: Record<string, FieldValue> = {}) {
  return list.fields.map((f) => ({
    id: f.id, key: f.key, name: f.name ?? f.key, field_type: f.fieldType, options: f.options ?? null, required: f.required ?? false,
    value: null, version: null, expires_at: null, ...values[f.key],
  }));
}

let seq = 0;
/** A fresh valid Argentine mobile per test: +54 9 11 6000-xxxx */
const freshPhone = () => `+549116000${String(10000 + ++seq).slice(1)}`;

describe('POST /api/v1/external/contacts/upsert/', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  const NOW = '2026-03-01T12:00:00.000Z';

  const upsert = (payload: unknown, key: string | null = KEY_101) =>
    t.app.inject({ method: 'POST', url: URL_UPSERT, headers: key ? { 'x-api-key': key } : {}, payload: payload as object });
  const get = (phone: string, key = KEY_101) =>
    t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': key } });
  const streamLength = async (stream: string) => (await t.services.store.readStream(stream)).length;

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
  });
  afterAll(() => t.close());
  beforeEach(() => clock.set(NOW));

  describe('create', () => {
    it('201: creates in the default list with source api; the body echoes every custom field of the list', async () => {
      const phone = freshPhone();
      const r = await upsert({
        phone, full_name: 'Ana Paz', email: 'ana@example.com', source_detail: 'landing', profile_picture: 'https://cdn.example/ana.png',
        custom_fields: [{ key: 'plan', value: ['gold'] }, { custom_field_id: 502, value: [3], expires_at: '2026-12-31T23:59:59Z' }],
      });
      expect(r.statusCode).toBe(201);
      const body = r.json();
      expect(body).toEqual({
        created: true,
        contact: {
          id: expect.any(Number), fullName: 'Ana Paz', email: 'ana@example.com', phone, source: 'api', sourceDetail: 'landing',
          contactListId: 11, profilePicture: 'https://cdn.example/ana.png',
          customFields: fieldsOf(LIST11, {
            plan: { value: ['gold'], version: 1 },
            visits: { value: [3], version: 1, expires_at: '2026-12-31T23:59:59.000Z' },
          }),
        },
        versionedCustomFields: [{ customFieldId: 501, key: 'plan', version: 1 }, { customFieldId: 502, key: 'visits', version: 1 }],
      });
      // read-your-writes: the get sees it at once
      const g = await get(phone);
      expect(g.json()).toEqual({
        found: true,
        contact: {
          id: body.contact.id, full_name: 'Ana Paz', email: 'ana@example.com', phone, source: 'api', source_detail: 'landing',
          profile_picture: 'https://cdn.example/ana.png', custom_fields: body.contact.customFields,
        },
      });
    });

    it('accepts camelCase top-level keys and a non-default list of the company', async () => {
      const phone = freshPhone();
      const r = await upsert({ phone, fullName: 'Leo', contactListId: 12, sourceDetail: 'fair', profilePicture: null, source: 'manual', customFields: [{ key: 'score', value: ['10'] }] });
      expect(r.statusCode).toBe(201);
      expect(r.json()).toEqual({
        created: true,
        contact: {
          id: expect.any(Number), fullName: 'Leo', email: null, phone, source: 'manual', sourceDetail: 'fair', contactListId: 12,
          profilePicture: null, customFields: fieldsOf(LIST12, { score: { value: [10], version: 1 } }),
        },
        versionedCustomFields: [{ customFieldId: 521, key: 'score', version: 1 }],
      });
    });

    it('empty strings for email, source_detail and profile_picture store no value', async () => {
      const r = await upsert({ phone: freshPhone(), email: '', source_detail: '', profile_picture: '' });
      expect(r.statusCode).toBe(201);
      expect(r.json().contact).toMatchObject({ email: null, sourceDetail: null, profilePicture: null, fullName: null });
    });

    it('a company without default list creates with an explicit contact_list_id', async () => {
      const phone = freshPhone();
      const r = await upsert({ phone, contact_list_id: 31 }, KEY_303);
      expect(r.statusCode).toBe(201);
      expect(r.json()).toEqual({
        created: true,
        contact: { id: expect.any(Number), fullName: null, email: null, phone, source: 'api', sourceDetail: null, contactListId: 31, profilePicture: null, customFields: [] },
        versionedCustomFields: [],
      });
    });
  });

  describe('rule 1: phone matching uses the variants; a created contact is stored with the E.164 number', () => {
    it('every Argentine spelling updates the contact created as +549...', async () => {
      const created = await upsert({ phone: '+54 9 11 7000-1234', full_name: 'Juan' });
      expect(created.statusCode).toBe(201);
      expect(created.json().contact.phone).toBe('+5491170001234');
      const id = created.json().contact.id;
      for (const variant of ['011 15 7000-1234', '11 15 7000 1234', '5491170001234', '541170001234', '+54 11 7000 1234', '(011) 15-7000-1234', '9 11 7000 1234']) {
        const r = await upsert({ phone: variant });
        expect({ variant, status: r.statusCode, created: r.json().created, id: r.json().contact.id, phone: r.json().contact.phone })
          .toEqual({ variant, status: 200, created: false, id, phone: '+5491170001234' });
      }
    });

    it('other countries: E.164 with or without +', async () => {
      const r1 = await upsert({ phone: '14155552671' });
      expect(r1.statusCode).toBe(201);
      expect(r1.json().contact.phone).toBe('+14155552671');
      const r2 = await upsert({ phone: '+1 (415) 555-2671' });
      expect([r2.statusCode, r2.json().contact.id]).toEqual([200, r1.json().contact.id]);
    });
  });

  describe('rule 2: atomic', () => {
    it('a new number with an invalid custom field creates nothing', async () => {
      const phone = freshPhone();
      const r = await upsert({ phone, full_name: 'Nope', custom_fields: [{ key: 'plan', value: ['gold'] }, { key: 'visits', value: ['many'] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[1] ("visits"): value must be an integer' });
      expect((await get(phone)).json()).toEqual({ found: false, contact: null });
      expect(await streamLength(contactPhoneStreamId(101, phone))).toBe(0);
    });

    it('an existing contact keeps everything when one part of the request is invalid', async () => {
      const phone = freshPhone();
      const created = (await upsert({ phone, full_name: 'Before', custom_fields: [{ key: 'plan', value: ['basic'] }] })).json();
      const stream = contactStreamId(101, created.contact.id);
      const before = await streamLength(stream);
      const r = await upsert({ phone, full_name: 'After', custom_fields: [{ key: 'plan', value: ['gold'] }, { key: 'allergies', value: ['dust'] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[1] ("allergies"): "dust" is not an option; options are ["latex","penicillin","pollen"]' });
      expect(await streamLength(stream)).toBe(before);
      const g = (await get(phone)).json();
      expect(g.contact.full_name).toBe('Before');
      expect(g.contact.custom_fields.find((f: { key: string }) => f.key === 'plan')).toMatchObject({ value: ['basic'], version: 1 });
    });

    it('an invalid profile datum saves none of the valid custom fields', async () => {
      const phone = freshPhone();
      await upsert({ phone });
      const r = await upsert({ phone, email: 'not-an-email', custom_fields: [{ key: 'plan', value: ['gold'] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'email "not-an-email" is not a valid email address' });
      expect((await get(phone)).json().contact.custom_fields[0]).toMatchObject({ key: 'plan', value: null, version: null });
    });
  });

  describe('rule 3: partial merge; an unchanged value and expiry creates no version', () => {
    it('absent profile fields and unsent custom fields keep their values', async () => {
      const phone = freshPhone();
      const created = (await upsert({
        phone, full_name: 'Ana', email: 'ana@example.com', source: 'organic', source_detail: 'ig',
        custom_fields: [{ key: 'plan', value: ['gold'] }, { key: 'visits', value: [2] }],
      })).json();
      const r = await upsert({ phone, full_name: 'Ana María', custom_fields: [{ key: 'visits', value: [3] }] });
      expect(r.statusCode).toBe(200);
      expect(r.json()).toEqual({
        created: false,
        contact: {
          id: created.contact.id, fullName: 'Ana María', email: 'ana@example.com', phone, source: 'organic', sourceDetail: 'ig',
          contactListId: 11, profilePicture: null,
          customFields: fieldsOf(LIST11, { plan: { value: ['gold'], version: 1 }, visits: { value: [3], version: 2 } }),
        },
        versionedCustomFields: [{ customFieldId: 502, key: 'visits', version: 2 }],
      });
    });

    it('an unchanged value and expiry creates no version; explicit null clears a profile field', async () => {
      const phone = freshPhone();
      await upsert({ phone, full_name: 'Ana', custom_fields: [{ key: 'plan', value: ['gold'], expires_at: '2026-06-01T00:00:00Z' }] });
      const r = await upsert({ phone, full_name: null, custom_fields: [{ key: 'plan', value: ['gold'], expires_at: '2026-05-31T21:00:00-03:00' }] });
      expect(r.statusCode).toBe(200);
      expect(r.json().versionedCustomFields).toEqual([]);
      expect(r.json().contact.fullName).toBeNull();
      expect(r.json().contact.customFields[0]).toMatchObject({ key: 'plan', value: ['gold'], version: 1, expires_at: '2026-06-01T00:00:00.000Z' });
    });
  });

  describe('rule 4: custom fields must belong to the list, appear once, match their type and options, not be grouped', () => {
    it('400: a field of another list of the company', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ key: 'score', value: [1] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[0]: no custom field with key "score" in contact list 11' });
    });

    it('400: a nonexistent custom_field_id', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ custom_field_id: 9999, value: ['x'] }] });
      expect(r.json()).toEqual({ error: 'custom_fields[0]: no custom field with custom_field_id 9999 in contact list 11' });
      expect(r.statusCode).toBe(400);
    });

    it('400: the same field twice, by key', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ key: 'plan', value: ['gold'] }, { key: 'plan', value: ['basic'] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[1] ("plan"): custom field 501 appears more than once (also custom_fields[0])' });
    });

    it('400: the same field twice, via both identifiers', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ custom_field_id: 501, value: ['gold'] }, { key: 'plan', value: ['gold'] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[1] ("plan"): custom field 501 appears more than once (also custom_fields[0])' });
    });

    it('400: a field of a repeatable group', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ key: 'guardian_name', value: ['Eva'] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[0] ("guardian_name"): fields of the repeatable group "guardians" cannot be set through this API' });
    });

    it('accepts a valid value of every field type (canonical numbers, multiselector in option order)', async () => {
      const r = await upsert({
        phone: freshPhone(),
        custom_fields: [
          { key: 'plan', value: ['basic'] },
          { key: 'visits', value: ['12'] },
          { key: 'allergies', value: ['pollen', 'latex'] },
          { key: 'next_visit', value: ['2026-04-10'] },
          { key: 'work_email', value: ['ana@work.example'] },
          { key: 'website', value: ['https://ana.example'] },
          { key: 'last_purchase', value: ['2026-02-10T15:30:00-03:00'] },
          { key: 'call_time', value: ['18:30'] },
          { key: 'balance', value: [-12.5] },
          { key: 'nickname', value: ['Anita'] },
          { key: 'notes', value: ['likes mornings'] },
          { key: 'history', value: ['line 1\nline 2'] },
        ],
      });
      expect(r.statusCode).toBe(201);
      const v = (value: unknown[]) => ({ value, version: 1 });
      expect(r.json().contact.customFields).toEqual(fieldsOf(LIST11, {
        plan: v(['basic']), visits: v([12]), allergies: v(['latex', 'pollen']), next_visit: v(['2026-04-10']),
        work_email: v(['ana@work.example']), website: v(['https://ana.example']), last_purchase: v(['2026-02-10T15:30:00-03:00']),
        call_time: v(['18:30']), balance: v([-12.5]), nickname: v(['Anita']), notes: v(['likes mornings']), history: v(['line 1\nline 2']),
      }));
      expect(r.json().versionedCustomFields).toHaveLength(12);
    });

    it.each([
      ['selector outside the options', 'plan', ['platinum'], 'value must be one of ["basic","gold"]'],
      ['selector with two values', 'plan', ['basic', 'gold'], 'a selector field takes exactly one value (got 2); only multiselector fields take several'],
      ['multiselector with a value not an option', 'allergies', ['latex', 'dust'], '"dust" is not an option; options are ["latex","penicillin","pollen"]'],
      ['multiselector with a repeated value', 'allergies', ['latex', 'latex'], 'values must be distinct'],
      ['int with a fraction', 'visits', [1.5], 'value must be an integer'],
      ['float that is not a number', 'balance', ['lots'], 'value must be a number'],
      ['date in another format', 'next_visit', ['10/04/2026'], 'value must be a date YYYY-MM-DD'],
      ['date that does not exist', 'next_visit', ['2026-02-29'], 'value must be a date YYYY-MM-DD'],
      ['datetime without zone', 'last_purchase', ['2026-02-10T15:30:00'], 'value must be an ISO 8601 date-time with a zone (e.g. 2026-01-10T12:00:00Z)'],
      ['time out of range', 'call_time', ['25:00'], 'value must be a time HH:MM or HH:MM:SS'],
      ['email without domain', 'work_email', ['ana@'], 'value must be a valid email address'],
      ['url without scheme', 'website', ['ana.example'], 'value must be a valid http(s) URL'],
      ['string given a number', 'nickname', [5], 'value must be a string'],
      ['string with two values', 'notes', ['a', 'b'], 'a text field takes exactly one value (got 2); only multiselector fields take several'],
    ])('400: %s', async (_d, key, value, message) => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ key, value }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: `custom_fields[0] (${JSON.stringify(key)}): ${message}` });
    });

    it('400: several problems are named together', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ key: 'plan', value: ['x'] }, { key: 'nope', value: ['y'] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[0] ("plan"): value must be one of ["basic","gold"]; custom_fields[1]: no custom field with key "nope" in contact list 11' });
    });

    it('value [] clears with a new version (value null); clearing again creates none', async () => {
      const phone = freshPhone();
      await upsert({ phone, custom_fields: [{ key: 'allergies', value: ['latex'] }] });
      const r1 = await upsert({ phone, custom_fields: [{ key: 'allergies', value: [] }] });
      expect(r1.statusCode).toBe(200);
      expect(r1.json().versionedCustomFields).toEqual([{ customFieldId: 503, key: 'allergies', version: 2 }]);
      expect(r1.json().contact.customFields[2]).toEqual({ ...fieldsOf(LIST11)[2], value: null, version: 2, expires_at: null });
      const r2 = await upsert({ phone, custom_fields: [{ key: 'allergies', value: [] }] });
      expect(r2.json().versionedCustomFields).toEqual([]);
      expect(r2.json().contact.customFields[2]).toMatchObject({ value: null, version: 2 });
    });
  });

  describe('expires_at', () => {
    it('set, omitted (kept), changed and null (removed); each change of expiry is a version', async () => {
      const phone = freshPhone();
      const r1 = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['gold'], expires_at: '2026-04-01T00:00:00Z' }] });
      expect(r1.json().contact.customFields[0]).toMatchObject({ value: ['gold'], version: 1, expires_at: '2026-04-01T00:00:00.000Z' });
      const r2 = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['gold'] }] });
      expect(r2.json().versionedCustomFields).toEqual([]);
      expect(r2.json().contact.customFields[0]).toMatchObject({ value: ['gold'], version: 1, expires_at: '2026-04-01T00:00:00.000Z' });
      const r3 = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['basic'] }] });
      expect(r3.json().contact.customFields[0]).toMatchObject({ value: ['basic'], version: 2, expires_at: '2026-04-01T00:00:00.000Z' });
      const r4 = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['basic'], expires_at: '2026-05-01T00:00:00Z' }] });
      expect(r4.json().versionedCustomFields).toEqual([{ customFieldId: 501, key: 'plan', version: 3 }]);
      const r5 = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['basic'], expires_at: null }] });
      expect(r5.json().versionedCustomFields).toEqual([{ customFieldId: 501, key: 'plan', version: 4 }]);
      expect(r5.json().contact.customFields[0]).toMatchObject({ value: ['basic'], version: 4, expires_at: null });
    });

    it('the active value respects expires_at at read time; the same value after expiry is a new version', async () => {
      const phone = freshPhone();
      await upsert({ phone, custom_fields: [{ key: 'visits', value: [5], expires_at: '2026-03-02T00:00:00Z' }] });
      clock.set('2026-03-02T00:00:00.001Z');
      const g = (await get(phone)).json();
      expect(g.contact.custom_fields[1]).toEqual({ ...fieldsOf(LIST11)[1], value: null, version: 1, expires_at: '2026-03-02T00:00:00.000Z' });
      const r = await upsert({ phone, custom_fields: [{ key: 'visits', value: [5] }] });
      expect(r.json().versionedCustomFields).toEqual([{ customFieldId: 502, key: 'visits', version: 2 }]);
      expect(r.json().contact.customFields[1]).toMatchObject({ value: [5], version: 2, expires_at: null });
    });

    it('400: a malformed expires_at', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ key: 'plan', value: ['gold'], expires_at: '31/12/2026' }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[0].expires_at must be an ISO 8601 date-time with a zone (e.g. 2026-12-31T23:59:59Z) or null' });
    });

    it('400: an expires_at in the past', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ key: 'plan', value: ['gold'], expires_at: '2026-01-01T00:00:00Z' }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'custom_fields[0].expires_at must be in the future (got 2026-01-01T00:00:00.000Z)' });
    });
  });

  describe('rule 5: fields not listed and protected fields', () => {
    it.each([
      ['an unknown field', { nickname: 'x' }, 'unknown field "nickname"'],
      ['id', { id: 1 }, 'field "id" is protected and cannot be set through the API'],
      ['a messaging-application identifier', { msgapp_id: 'wa-1' }, 'field "msgapp_id" is protected and cannot be set through the API'],
      ['a photo-application identifier', { photoapp_username: 'ana' }, 'field "photoapp_username" is protected and cannot be set through the API'],
      ['a date', { created_at: '2026-01-01T00:00:00Z' }, 'field "created_at" is protected and cannot be set through the API'],
      ['an internal flag', { is_test: true }, 'field "is_test" is protected and cannot be set through the API'],
      ['a top-level field in both casings', { full_name: 'a', fullName: 'b' }, 'field "full_name" is given twice (as "full_name" and "fullName")'],
    ])('400: %s', async (_d, extra, message) => {
      const phone = freshPhone();
      const r = await upsert({ phone, ...extra });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: message });
      expect((await get(phone)).json().found).toBe(false);
    });

    it('400: customFieldId (camelCase) inside an item', async () => {
      const r = await upsert({ phone: freshPhone(), custom_fields: [{ customFieldId: 501, value: ['gold'] }] });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({
        error: 'custom_fields[0].customFieldId is not accepted: keys inside custom_fields are snake_case (custom_field_id); custom_fields[0] must identify the field by custom_field_id or by key',
      });
    });

    it('400: custom_field_id and key together; neither', async () => {
      const both = await upsert({ phone: freshPhone(), custom_fields: [{ custom_field_id: 501, key: 'plan', value: ['gold'] }] });
      expect([both.statusCode, both.json()]).toEqual([400, { error: 'custom_fields[0] must identify the field by custom_field_id or by key, not both' }]);
      const neither = await upsert({ phone: freshPhone(), custom_fields: [{ value: ['gold'] }] });
      expect([neither.statusCode, neither.json()]).toEqual([400, { error: 'custom_fields[0] must identify the field by custom_field_id or by key' }]);
    });

    it('400: a list change of an existing contact; the same list is accepted', async () => {
      const phone = freshPhone();
      const created = (await upsert({ phone })).json();
      const r = await upsert({ phone, contact_list_id: 12 });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: `contact_list_id cannot change for an existing contact: contact ${created.contact.id} belongs to list 11 (got 12)` });
      const same = await upsert({ phone, contact_list_id: 11 });
      expect([same.statusCode, same.json().created]).toEqual([200, false]);
    });
  });

  describe('rule 6: idempotent per phone', () => {
    it('repeating a request creates no duplicate contact and no versions', async () => {
      const phone = freshPhone();
      const payload = { phone, full_name: 'Rep', custom_fields: [{ key: 'plan', value: ['gold'] }, { key: 'allergies', value: ['latex'] }] };
      const first = await upsert(payload);
      const stream = contactStreamId(101, first.json().contact.id);
      const events = await streamLength(stream);
      for (let i = 0; i < 3; i++) {
        const again = await upsert(payload);
        expect(again.statusCode).toBe(200);
        expect(again.json()).toEqual({ ...first.json(), created: false, versionedCustomFields: [] });
      }
      expect(await streamLength(stream)).toBe(events);
      expect(await streamLength(contactPhoneStreamId(101, phone))).toBe(1);
    });
  });

  describe('400 (other conditions)', () => {
    it.each([
      ['phone absent', { full_name: 'x' }, 'phone is required'],
      ['phone not normalizable', { phone: '12345' }, 'phone "12345" is not a valid phone number: use E.164 with the country code (e.g. +5491155551234)'],
      ['phone of another country without country code', { phone: '612 34 56 78' }, 'phone "612 34 56 78" is not a valid phone number: use E.164 with the country code (e.g. +5491155551234)'],
      ['contact_list_id nonexistent', { phone: '+5491160999001', contact_list_id: 999 }, 'contact_list_id 999 does not exist in this company'],
      ['contact_list_id of another company', { phone: '+5491160999002', contact_list_id: 21 }, 'contact_list_id 21 does not exist in this company'],
    ])('%s', async (_d, payload, message) => {
      const r = await upsert(payload);
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: message });
    });

    it('no default list and no contact_list_id', async () => {
      const r = await upsert({ phone: freshPhone() }, KEY_303);
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: 'contact_list_id is required: the company has no default contact list' });
    });

    it('a body that is not a JSON object; invalid JSON', async () => {
      const arr = await upsert([{ phone: '+5491160999003' }]);
      expect([arr.statusCode, arr.json()]).toEqual([400, { error: 'request body must be a JSON object' }]);
      const bad = await t.app.inject({ method: 'POST', url: URL_UPSERT, headers: { 'x-api-key': KEY_101, 'content-type': 'application/json' }, payload: '{"phone":' });
      expect([bad.statusCode, bad.json()]).toEqual([400, { error: 'request body is not valid JSON' }]);
    });
  });

  describe('401: no valid, active, unexpired Company API key', () => {
    it.each([
      ['no key', null, 'API key required: send it in the X-API-Key header'],
      ['an unknown key', 'sbk_doesnotexist0000000000000000', 'invalid API key'],
      ['not a key of ours', 'Bearer abc', 'invalid API key'],
      ['an expired key', KEY_101_EXPIRED, 'API key expired'],
      ['a revoked key', KEY_101_REVOKED, 'API key revoked'],
      ['a global key', KEY_GLOBAL, 'a company API key is required for this endpoint'],
    ])('%s', async (_d, key, message) => {
      const r = await upsert({ phone: '+5491160999004' }, key);
      expect(r.statusCode).toBe(401);
      expect(r.json()).toEqual({ error: message });
    });

    it('401 comes before body validation', async () => {
      const r = await upsert({ id: 1 }, null);
      expect([r.statusCode, r.json()]).toEqual([401, { error: 'API key required: send it in the X-API-Key header' }]);
    });
  });

  describe('409: more than one company contact has the number', () => {
    it('is reported for the upsert and the get; nothing is chosen or changed', async () => {
      await seedFixtureContacts(t.services, 101, [
        { id: 880001, contactListId: 11, fullName: 'Twin A', phone: '011 15 6666-0001', email: null, source: 'manual', sourceDetail: null, profilePicture: null, isTest: false, createdAt: '2026-01-01T00:00:00Z', customFields: [] },
        { id: 880002, contactListId: 12, fullName: 'Twin B', phone: '+54 9 11 6666-0001', email: null, source: 'manual', sourceDetail: null, profilePicture: null, isTest: false, createdAt: '2026-01-02T00:00:00Z', customFields: [] },
      ], { actor: 'test', correlationId: 'c' });
      const r = await upsert({ phone: '+5491166660001', full_name: 'Who?' });
      expect(r.statusCode).toBe(409);
      expect(r.json()).toEqual({ error: 'more than one contact of this company has the number +5491166660001 (contacts 880001, 880002)' });
      const g = await get('541166660001');
      expect(g.statusCode).toBe(409);
      expect(g.json()).toEqual({ error: 'more than one contact of this company has the number +5491166660001' });
      expect(await streamLength(contactStreamId(101, 880001))).toBe(1);
    });

    it('a test contact holding the number does not count: the upsert creates the real contact', async () => {
      await seedFixtureContacts(t.services, 101, [
        { id: 880003, contactListId: 11, fullName: 'QA', phone: '+5491166660002', email: null, source: 'manual', sourceDetail: null, profilePicture: null, isTest: true, createdAt: '2026-01-01T00:00:00Z', customFields: [] },
      ], { actor: 'test', correlationId: 'c' });
      const r = await upsert({ phone: '+5491166660002', full_name: 'Real' });
      expect(r.statusCode).toBe(201);
      expect(r.json().contact.id).not.toBe(880003);
      const again = await upsert({ phone: '+5491166660002' });
      expect([again.statusCode, again.json().contact.id]).toEqual([200, r.json().contact.id]);
    });
  });

  it('scopes to the key\'s company: the same number in another company is another contact', async () => {
    const phone = freshPhone();
    const a = (await upsert({ phone }, KEY_101)).json();
    const b = await upsert({ phone, custom_fields: [{ key: 'tier', value: ['vip'] }] }, KEY_202);
    expect(b.statusCode).toBe(201);
    expect(b.json().contact.id).not.toBe(a.contact.id);
    expect(b.json().contact.contactListId).toBe(21);
  });
});
