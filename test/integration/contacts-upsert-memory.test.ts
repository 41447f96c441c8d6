import { randomUUID } from 'node:crypto';
import { seedFixtureContacts, type FixtureContact } from '../../src/commands/contact/fixture';
import { contactStreamId } from '../../src/commands/contact/decider';
import { createTestApp } from '../support/services';
import { appendEvents, KEY_101, provisionAll, settle, testClock } from './contacts-support';

// The upsert's memory of this process's last upsert of a number (UpsertMemory, kept by src/http/contact-cache.ts):
// an update decided on it reads nothing; whatever changed meanwhile elsewhere (the contact, its claims, the list's
// fields) still decides the outcome.

/** marks of changes in progress hold 2 s (src/projections/change-signals.ts) */
const settleMarks = () => new Promise((r) => setTimeout(r, 2_100));

const contact = (over: Partial<FixtureContact>): FixtureContact => ({
  contactListId: 11, fullName: null, phone: '', email: null, source: 'manual', sourceDetail: null, profilePicture: null,
  isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [], ...over,
});

describe('upserts decided on the memory of the last upsert of the number', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  let queries: string[] = [];
  const snapshots = () => queries.filter((q) => q === 'contacts_upsert_snapshot').length;

  const upsert = (payload: object) =>
    t.app.inject({ method: 'POST', url: '/api/v1/external/contacts/upsert/', headers: { 'x-api-key': KEY_101 }, payload });
  const visits = async (phone: string) => {
    const r = await t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } });
    return r.json().contact.custom_fields.find((f: { key: string }) => f.key === 'visits');
  };
  const versionsOf = async (contactId: number) =>
    (await t.services.store.readStream(contactStreamId(101, contactId)))
      .filter((e) => e.type === 'CustomFieldValueSet' && (e.data as { fieldId: number }).fieldId === 502)
      .map((e) => [(e.data as { version: number }).version, (e.data as { value: number[] }).value[0]]);

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
    const original = t.services.pool.query.bind(t.services.pool);
    jest.spyOn(t.services.pool, 'query').mockImplementation(((config: unknown, ...rest: unknown[]) => {
      if (config && typeof config === 'object' && 'name' in config) queries.push(String((config as { name: string }).name));
      return (original as (...a: unknown[]) => unknown)(config, ...rest);
    }) as never);
  });
  afterAll(() => t?.close());
  beforeEach(() => {
    queries = [];
  });

  it('an update after an update of the same number reads nothing before it appends', async () => {
    const phone = '+5491162000001';
    expect((await upsert({ phone, custom_fields: [{ key: 'visits', value: [1] }] })).statusCode).toBe(201);
    await settleMarks();
    expect((await upsert({ phone, custom_fields: [{ key: 'visits', value: [2] }] })).statusCode).toBe(200); // read model
    queries = [];
    for (const v of [3, 4, 5]) {
      const r = await upsert({ phone, full_name: `N${v}`, custom_fields: [{ key: 'visits', value: [v] }] });
      expect([r.statusCode, r.json().versionedCustomFields]).toEqual([200, [{ customFieldId: 502, key: 'visits', version: v }]]);
      expect(r.json().contact.fullName).toBe(`N${v}`);
    }
    expect(snapshots()).toBe(0);
    expect(await versionsOf((await upsert({ phone })).json().contact.id)).toEqual([[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]]);
  });

  it('a contact changed elsewhere meanwhile: the append fails on its revision and the upsert decides again', async () => {
    const phone = '+5491162000002';
    const id = (await upsert({ phone, custom_fields: [{ key: 'visits', value: [1] }] })).json().contact.id;
    await settleMarks();
    await upsert({ phone, custom_fields: [{ key: 'visits', value: [2] }] }); // remembered at version 2
    // another process sets visits to 3 (version 3)
    const stream = contactStreamId(101, id);
    const head = (await t.services.store.readStream(stream)).at(-1)!.revision;
    const meta = { correlationId: randomUUID(), causationId: null, companyId: 101, actor: 'other', at: clock.now().toISOString() };
    const { position } = await t.services.store.append(stream, [{
      type: 'CustomFieldValueSet', data: { companyId: 101, contactId: id, fieldId: 502, key: 'visits', version: 3, value: [3], expiresAt: null },
      metadata: { ...meta, eventId: randomUUID() },
    }], head);
    await t.services.runner.waitForEvents(position, ['CustomFieldValueSet']);
    const r = await upsert({ phone, custom_fields: [{ key: 'visits', value: [4] }] });
    expect([r.statusCode, r.json().versionedCustomFields]).toEqual([200, [{ customFieldId: 502, key: 'visits', version: 4 }]]);
    expect(await versionsOf(id)).toEqual([[1, 1], [2, 2], [3, 3], [4, 4]]);
  });

  it('an unchanged value per memory is checked on the read model (a change made elsewhere is not lost)', async () => {
    const phone = '+5491162000003';
    const id = (await upsert({ phone, custom_fields: [{ key: 'visits', value: [1] }] })).json().contact.id;
    await settleMarks();
    await upsert({ phone, custom_fields: [{ key: 'visits', value: [2] }] }); // remembered with visits = 2
    const stream = contactStreamId(101, id);
    const head = (await t.services.store.readStream(stream)).at(-1)!.revision;
    const meta = { correlationId: randomUUID(), causationId: null, companyId: 101, actor: 'other', at: clock.now().toISOString() };
    const { position } = await t.services.store.append(stream, [{
      type: 'CustomFieldValueSet', data: { companyId: 101, contactId: id, fieldId: 502, key: 'visits', version: 3, value: [9], expiresAt: null },
      metadata: { ...meta, eventId: randomUUID() },
    }], head);
    await t.services.runner.waitForEvents(position, ['CustomFieldValueSet']);
    const r = await upsert({ phone, custom_fields: [{ key: 'visits', value: [2] }] }); // the same as remembered, not as stored
    expect([r.statusCode, r.json().versionedCustomFields]).toEqual([200, [{ customFieldId: 502, key: 'visits', version: 4 }]]);
    expect(await visits(phone)).toMatchObject({ value: [2], version: 4 });
  });

  it('a second holder seeded for the number: the next upsert answers 409', async () => {
    const phone = '+5491162000004';
    await upsert({ phone, custom_fields: [{ key: 'visits', value: [1] }] });
    await settleMarks();
    await upsert({ phone, custom_fields: [{ key: 'visits', value: [2] }] }); // remembered
    await seedFixtureContacts(t.services, 101, [contact({ id: 9301, fullName: 'Twin', phone, contactListId: 12 })], { actor: 'cli', correlationId: 'seed' });
    const r = await upsert({ phone, custom_fields: [{ key: 'visits', value: [3] }] });
    expect(r.statusCode).toBe(409);
    expect(r.json().error).toMatch(/^more than one contact of this company has the number \+5491162000004/);
  });

  it('a changed field definition: the next upsert is validated against it', async () => {
    const phone = '+5491162000005';
    await upsert({ phone, custom_fields: [{ key: 'plan', value: ['basic'] }] });
    await settleMarks();
    expect((await upsert({ phone, custom_fields: [{ key: 'plan', value: ['gold'] }] })).statusCode).toBe(200); // remembered
    await appendEvents(t.services, 'company-101', [{
      type: 'CustomFieldChanged',
      data: { companyId: 101, listId: 11, fieldId: 501, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'platinum'], required: false, group: null },
    }], 101);
    await settle(t.services);
    const r = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['platinum'] }] });
    expect([r.statusCode, r.json().versionedCustomFields]).toEqual([200, [{ customFieldId: 501, key: 'plan', version: 3 }]]);
    const refused = await upsert({ phone, custom_fields: [{ key: 'plan', value: ['gold'] }] });
    expect([refused.statusCode, refused.json()]).toEqual([400, { error: 'custom_fields[0] ("plan"): value must be one of ["basic","platinum"]' }]);
  });

  describe('a number this process does not remember, while such numbers have lately been new', () => {
    const claimsOf = async (phone: string) =>
      (await t.services.store.readStream(`contactphone-101-${phone}`)).map((e) => (e.data as { contactId: number }).contactId);
    let fresh = 100;
    /** new numbers, one after another: the default list is remembered, and unremembered numbers have lately been new */
    const primeWithNewNumbers = async () => {
      await settleMarks();
      for (let i = 0; i < 15; i++) expect((await upsert({ phone: `+5491162100${fresh++}` })).statusCode).toBe(201);
      queries = [];
    };

    it('is created without reading anything before the append', async () => {
      await primeWithNewNumbers();
      const r = await upsert({ phone: '+5491162100001', full_name: 'Nueva', custom_fields: [{ key: 'visits', value: [1] }] });
      expect([r.statusCode, r.json().created, r.json().versionedCustomFields]).toEqual([201, true, [{ customFieldId: 502, key: 'visits', version: 1 }]]);
      expect(snapshots()).toBe(0);
      expect(await visits('+5491162100001')).toMatchObject({ value: [1], version: 1 });
      expect(await claimsOf('+5491162100001')).toEqual([r.json().contact.id]);
    });

    it('held by a contact it never upserted: the claim append fails and the upsert updates that contact', async () => {
      const phone = '+5491162100002';
      await seedFixtureContacts(t.services, 101, [contact({ id: 99302, fullName: 'Vieja', phone })], { actor: 'cli', correlationId: 'seed' });
      await settle(t.services);
      await primeWithNewNumbers();
      const r = await upsert({ phone, custom_fields: [{ key: 'visits', value: [7] }] });
      expect([r.statusCode, r.json().created, r.json().contact.id, r.json().contact.fullName]).toEqual([200, false, 99302, 'Vieja']);
      expect([queries.filter((q) => q === 'es_append_many').length, snapshots()]).toEqual([1, 1]); // the create tried, then the read model
      expect(await claimsOf(phone)).toEqual([99302]);
      expect(await visits(phone)).toMatchObject({ value: [7], version: 1 });
    });

    it('a changed field definition: a new number is validated against it', async () => {
      await primeWithNewNumbers();
      await appendEvents(t.services, 'company-101', [{
        type: 'CustomFieldChanged',
        data: { companyId: 101, listId: 11, fieldId: 501, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'diamond'], required: false, group: null },
      }], 101);
      await settle(t.services);
      const r = await upsert({ phone: '+5491162100003', custom_fields: [{ key: 'plan', value: ['diamond'] }] });
      expect([r.statusCode, r.json().versionedCustomFields]).toEqual([201, [{ customFieldId: 501, key: 'plan', version: 1 }]]);
      const refused = await upsert({ phone: '+5491162100004', custom_fields: [{ key: 'plan', value: ['gold'] }] });
      expect([refused.statusCode, refused.json()]).toEqual([400, { error: 'custom_fields[0] ("plan"): value must be one of ["basic","diamond"]' }]);
      expect(await claimsOf('+5491162100004')).toEqual([]);
    });

    it('an invalid request is refused as before and leaves nothing', async () => {
      await primeWithNewNumbers();
      const before = await t.db.pool.query('SELECT count(*)::int AS n FROM es.events');
      const refused = await upsert({ phone: '+5491162100005', custom_fields: [{ key: 'nope', value: ['x'] }] });
      expect(refused.statusCode).toBe(400);
      expect(refused.json().error).toMatch(/nope/);
      expect((await t.db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows[0].n).toBe(before.rows[0].n);
    });

    it('once such numbers have lately been existing ones, the upsert reads before it appends', async () => {
      await primeWithNewNumbers();
      const phones = Array.from({ length: 20 }, (_, i) => `+54911623000${String(i).padStart(2, '0')}`);
      await seedFixtureContacts(t.services, 101, phones.map((phone, i) => contact({ id: 99400 + i, fullName: `Sync ${i}`, phone })), { actor: 'cli', correlationId: 'seed-sync' });
      await settle(t.services);
      await settleMarks();
      for (const [i, phone] of phones.entries()) {
        queries = [];
        const r = await upsert({ phone, custom_fields: [{ key: 'visits', value: [i] }] });
        expect([r.statusCode, r.json().contact.id]).toEqual([200, 99400 + i]);
      }
      // the last upsert (as every one after the share of new numbers fell below a half) tried no create
      expect([snapshots(), queries.filter((q) => q === 'es_append_many').length]).toEqual([1, 0]);
    });
  });
});
