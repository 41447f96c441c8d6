import { seedFixtureContacts, type FixtureContact } from '../../src/commands/contact/fixture';
import { createTestApp } from '../support/services';
import {
  KEY_101, KEY_101_EXPIRED, KEY_202, KEY_GLOBAL, LISTS_101, provisionAll, recordMessage, settle, testClock,
} from '../integration/contacts-support';

// GET /api/v1/contact-lookup/ and GET /api/v1/external/contacts/.

const contact = (over: Partial<FixtureContact>): FixtureContact => ({
  contactListId: 11, fullName: null, phone: '', email: null, source: 'manual', sourceDetail: null, profilePicture: null,
  isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [], ...over,
});

const NOT_FOUND = { found: false, contact: null, hasReplied: false, lastReplyAt: null, sessionWindowActive: false, sessionExpiresAt: null };

describe('contact lookup and external get', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  const lookup = (phone: string | null, key: string | null = KEY_101) =>
    t.app.inject({
      method: 'GET',
      url: phone === null ? '/api/v1/contact-lookup/' : `/api/v1/contact-lookup/?phone=${encodeURIComponent(phone)}`,
      headers: key ? { 'x-api-key': key } : {},
    });
  const get = (phone: string | null, key: string | null = KEY_101) =>
    t.app.inject({
      method: 'GET',
      url: phone === null ? '/api/v1/external/contacts/' : `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`,
      headers: key ? { 'x-api-key': key } : {},
    });

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
    const ctx = { actor: 'test', correlationId: 'seed' };
    await seedFixtureContacts(t.services, 101, [
      contact({
        id: 9001, fullName: 'Juan Perez', phone: '011 15 5555-1234', email: 'juan@example.com',
        customFields: [{ key: 'plan', value: ['gold'], expiresAt: null }, { key: 'visits', value: [4], expiresAt: '2026-02-01T00:00:00Z' }],
      }),
      contact({ id: 9002, fullName: 'Dir', phone: '+54 9 11 5555-2000', source: 'directory_contacts', contactListId: 12 }),
      contact({ id: 9003, fullName: 'QA tester', phone: '+54 9 11 5555-3000', isTest: true }),
      contact({ id: 9004, fullName: 'Replied by id', phone: '+54 9 11 5555-4000' }),
    ], ctx);
    await seedFixtureContacts(t.services, 202, [contact({ id: 9101, fullName: 'Other company', phone: '+54 9 11 5555-9000', contactListId: 21 })], ctx);
    // inbound messages: by phone (provider form, without the 9), by contact id; outbound ones do not count
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-02-27T10:00:00Z', contactPhone: '541155551234' });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-03-01T02:00:00Z', contactPhone: '+54 9 11 5555-1234' });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-02-28T01:00:00Z', contactPhone: '+5491155551234' });
    await recordMessage(t.services, { companyId: 101, direction: 'outbound', occurredAt: '2026-03-01T11:00:00Z', contactPhone: '+5491155551234' });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-02-20T08:00:00Z', contactId: 9004 });
    await recordMessage(t.services, { companyId: 101, direction: 'outbound', occurredAt: '2026-03-01T11:00:00Z', contactPhone: '+5491155552000' });
    await recordMessage(t.services, { companyId: 202, direction: 'inbound', occurredAt: '2026-03-01T11:00:00Z', contactPhone: '+5491155552000' });
    await settle(t.services);
  });
  afterAll(() => t.close());
  beforeEach(() => clock.set('2026-03-01T12:00:00.000Z'));

  describe('GET /api/v1/contact-lookup/', () => {
    const juan = {
      id: 9001, fullName: 'Juan Perez', phone: '+5491155551234', email: 'juan@example.com', contactListId: 11,
      contactListName: 'Patients', source: 'manual', createdAt: '2026-01-10T12:00:00.000Z',
    };

    it('finds the contact with reply stats and an active session window (last inbound message + 24 h)', async () => {
      const r = await lookup('011 15 5555-1234');
      expect(r.statusCode).toBe(200);
      expect(r.json()).toEqual({
        found: true, contact: juan, hasReplied: true, lastReplyAt: '2026-03-01T02:00:00.000Z',
        sessionWindowActive: true, sessionExpiresAt: '2026-03-02T02:00:00.000Z',
      });
    });

    it.each(['+5491155551234', '5491155551234', '541155551234', '+54 11 5555-1234', '11 5555 1234', '9 11 5555 1234', '(011) 15-5555-1234'])(
      'finds it by the variant %j', async (variant) => {
        const r = await lookup(variant);
        expect([r.statusCode, r.json().found, r.json().contact?.id]).toEqual([200, true, 9001]);
      },
    );

    it('an unencoded + in the query (read as a space) still finds the contact', async () => {
      const r = await t.app.inject({ method: 'GET', url: '/api/v1/contact-lookup/?phone=+5491155551234', headers: { 'x-api-key': KEY_101 } });
      expect([r.statusCode, r.json().contact?.id]).toEqual([200, 9001]);
    });

    it('the session window closes 24 h after the last inbound message', async () => {
      clock.set('2026-03-02T02:00:00.000Z');
      const r = await lookup('+5491155551234');
      expect(r.json()).toEqual({
        found: true, contact: juan, hasReplied: true, lastReplyAt: '2026-03-01T02:00:00.000Z',
        sessionWindowActive: false, sessionExpiresAt: '2026-03-02T02:00:00.000Z',
      });
    });

    it('replies recorded by contact id count; outbound messages do not', async () => {
      const byId = (await lookup('+5491155554000')).json();
      expect(byId).toMatchObject({ found: true, hasReplied: true, lastReplyAt: '2026-02-20T08:00:00.000Z', sessionWindowActive: false, sessionExpiresAt: '2026-02-21T08:00:00.000Z' });
      const outboundOnly = (await lookup('+5491155552000')).json();
      expect(outboundOnly).toEqual({
        found: true,
        contact: {
          id: 9002, fullName: 'Dir', phone: '+5491155552000', email: null, contactListId: 12, contactListName: 'Leads',
          source: 'other', createdAt: '2026-01-10T12:00:00.000Z',
        },
        hasReplied: false, lastReplyAt: null, sessionWindowActive: false, sessionExpiresAt: null,
      });
    });

    it('test contacts are found by the lookup', async () => {
      const r = await lookup('+5491155553000');
      expect(r.json()).toMatchObject({ found: true, contact: { id: 9003, fullName: 'QA tester' } });
    });

    it('is scoped to the key\'s company: another company\'s contact is not found', async () => {
      expect((await lookup('+5491155559000')).json()).toEqual(NOT_FOUND);
      expect((await lookup('+5491155559000', KEY_202)).json()).toMatchObject({ found: true, contact: { id: 9101 } });
    });

    it('not found: an unknown or invalid number (always 200 with a phone)', async () => {
      for (const phone of ['+5491199998888', 'not-a-phone', '123']) {
        const r = await lookup(phone);
        expect([r.statusCode, r.json()]).toEqual([200, NOT_FOUND]);
      }
    });

    it('400 without phone (or an empty one)', async () => {
      for (const phone of [null, '', '  ']) {
        const r = await lookup(phone);
        expect([r.statusCode, r.json()]).toEqual([400, { error: 'phone is required' }]);
      }
    });

    it('401 without a key or with an expired one; 403 for a global key', async () => {
      expect(await lookup('+5491155551234', null).then((r) => [r.statusCode, r.json()])).toEqual([401, { error: 'API key required: send it in the X-API-Key header' }]);
      expect(await lookup('+5491155551234', KEY_101_EXPIRED).then((r) => [r.statusCode, r.json()])).toEqual([401, { error: 'API key expired' }]);
      expect(await lookup('+5491155551234', KEY_GLOBAL).then((r) => [r.statusCode, r.json()])).toEqual([403, { error: 'this API key has no access to company resources' }]);
    });
  });

  describe('GET /api/v1/external/contacts/', () => {
    it('the snake_case get view with every custom field of the list (an expired value reads null)', async () => {
      const r = await get('+54 9 11 5555-1234');
      expect(r.statusCode).toBe(200);
      const empty = { value: null, version: null, expires_at: null };
      expect(r.json()).toEqual({
        found: true,
        contact: {
          id: 9001, full_name: 'Juan Perez', email: 'juan@example.com', phone: '+5491155551234', source: 'manual', source_detail: null,
          profile_picture: null,
          custom_fields: LISTS_101[0].fields.map((f) => ({
            id: f.id, key: f.key, name: f.name, field_type: f.fieldType, options: f.options ?? null, required: f.required ?? false,
            ...(f.key === 'plan' ? { value: ['gold'], version: 1, expires_at: null }
              : f.key === 'visits' ? { value: null, version: 1, expires_at: '2026-02-01T00:00:00.000Z' }
                : empty),
          })),
        },
      });
    });

    it('before the expiry the value is active', async () => {
      clock.set('2026-01-31T23:59:59.000Z');
      const fields = (await get('+5491155551234')).json().contact.custom_fields;
      expect(fields[1]).toMatchObject({ key: 'visits', value: [4], version: 1, expires_at: '2026-02-01T00:00:00.000Z' });
    });

    it('accepts the provider form and the Argentine 15 variant', async () => {
      for (const v of ['541155551234', '5491155551234', '011 15 5555-1234']) {
        expect((await get(v)).json().contact.id).toBe(9001);
      }
    });

    it('a test contact is invisible; another company\'s contact is absent; both found:false', async () => {
      expect(await get('+5491155553000').then((r) => [r.statusCode, r.json()])).toEqual([200, { found: false, contact: null }]);
      expect(await get('+5491155559000').then((r) => [r.statusCode, r.json()])).toEqual([200, { found: false, contact: null }]);
      expect(await get('garbage').then((r) => [r.statusCode, r.json()])).toEqual([200, { found: false, contact: null }]);
    });

    it('400 without phone', async () => {
      expect(await get(null).then((r) => [r.statusCode, r.json()])).toEqual([400, { error: 'phone is required' }]);
    });

    it('401 for a global key, a missing key and an expired key', async () => {
      expect(await get('+5491155551234', KEY_GLOBAL).then((r) => [r.statusCode, r.json()])).toEqual([401, { error: 'a company API key is required for this endpoint' }]);
      expect(await get('+5491155551234', null).then((r) => [r.statusCode, r.json()])).toEqual([401, { error: 'API key required: send it in the X-API-Key header' }]);
      expect(await get('+5491155551234', KEY_101_EXPIRED).then((r) => [r.statusCode, r.json()])).toEqual([401, { error: 'API key expired' }]);
      expect(await get(null, null).then((r) => r.statusCode)).toBe(401);
    });
  });
});
