import { seedFixtureContacts, type FixtureContact } from '../../src/commands/contact/fixture';
import { contactCacheOf } from '../../src/http/contact-cache';
import { CONTACTS_CHANGED_CHANNEL } from '../../src/projections/change-signals';
import { createTestApp } from '../support/services';
import { eventually } from '../support/sends';
import { appendEvents, KEY_101, provisionAll, recordMessage, settle, testClock } from './contacts-support';

// The per-process cache of contact lookups and external gets (src/http/contact-cache.ts): repeated reads cost no
// query; writes of this process are visible to the next read; changes notified by other processes drop entries;
// without the LISTEN connection every read queries; time-dependent fields are computed when read.

/** marks of changes in progress hold 2 s (src/projections/change-signals.ts) */
const settleMarks = () => new Promise((r) => setTimeout(r, 2_100));

const contact = (over: Partial<FixtureContact>): FixtureContact => ({
  contactListId: 11, fullName: null, phone: '', email: null, source: 'manual', sourceDetail: null, profilePicture: null,
  isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [], ...over,
});

describe('contact cache (lookup and external get)', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  let queries: string[] = [];
  const reads = () => queries.filter((q) => q === 'contacts_lookup' || q === 'contacts_external');

  const lookup = (phone: string) =>
    t.app.inject({ method: 'GET', url: `/api/v1/contact-lookup/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } });
  const get = (phone: string) =>
    t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } });
  const upsert = (payload: object) =>
    t.app.inject({ method: 'POST', url: '/api/v1/external/contacts/upsert/', headers: { 'x-api-key': KEY_101 }, payload });
  const field = (body: { contact: { custom_fields: Array<{ key: string }> } }, key: string) => body.contact.custom_fields.find((f) => f.key === key);

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
    await seedFixtureContacts(t.services, 101, [
      contact({ id: 9101, fullName: 'Ana', phone: '+5491177770001' }),
      contact({ id: 9102, fullName: 'Beto', phone: '+5491177770002', customFields: [{ key: 'plan', value: ['gold'], expiresAt: '2026-03-01T18:00:00Z' }] }),
      contact({ id: 9103, fullName: 'Ceci', phone: '+5491177770003' }),
      contact({ id: 9104, fullName: 'Dani', phone: '+5491177770004' }),
      contact({ id: 9105, fullName: 'Eli', phone: '+5491177770005', customFields: [{ key: 'visits', value: [7], expiresAt: null }] }),
    ], { actor: 'test', correlationId: 'seed' });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-03-01T10:00:00Z', contactPhone: '+5491177770002' });
    await settle(t.services);
    const original = t.services.pool.query.bind(t.services.pool);
    jest.spyOn(t.services.pool, 'query').mockImplementation(((config: unknown, ...rest: unknown[]) => {
      if (config && typeof config === 'object' && 'name' in config) queries.push(String((config as { name: string }).name));
      return (original as (...a: unknown[]) => unknown)(config, ...rest);
    }) as never);
    await settleMarks();
  });
  afterAll(() => t?.close());
  beforeEach(() => {
    clock.set('2026-03-01T12:00:00.000Z');
    queries = [];
  });

  it('serves repeated lookups and gets from memory, under every spelling of the number', async () => {
    for (const phone of ['+5491177770001', '011 15 7777-0001', '541177770001']) {
      expect((await lookup(phone)).json()).toMatchObject({ found: true, contact: { id: 9101, fullName: 'Ana' } });
      expect((await get(phone)).json()).toMatchObject({ found: true, contact: { id: 9101, full_name: 'Ana' } });
    }
    expect(reads()).toEqual(['contacts_lookup', 'contacts_external']);
    // not found is cached too; an invalid number needs no query at all
    for (let i = 0; i < 2; i++) expect((await lookup('+5491177779999')).json().found).toBe(false);
    expect((await lookup('not a phone')).json().found).toBe(false);
    expect(reads()).toEqual(['contacts_lookup', 'contacts_external', 'contacts_lookup']);
  });

  it('an upsert is visible to the next lookup and get (read-your-writes), then cached again', async () => {
    expect((await lookup('+5491177770003')).json().contact.fullName).toBe('Ceci');
    expect(field((await get('+5491177770003')).json(), 'visits')).toMatchObject({ value: null, version: null });
    const r = await upsert({ phone: '+5491177770003', full_name: 'Cecilia', custom_fields: [{ key: 'visits', value: [7] }] });
    expect(r.statusCode).toBe(200);
    expect((await lookup('+5491177770003')).json().contact.fullName).toBe('Cecilia');
    expect(field((await get('+5491177770003')).json(), 'visits')).toMatchObject({ value: [7], version: 1 });
    await settleMarks();
    queries = [];
    for (let i = 0; i < 3; i++) {
      expect((await lookup('+5491177770003')).json().contact.fullName).toBe('Cecilia');
      expect(field((await get('+5491177770003')).json(), 'visits')).toMatchObject({ value: [7], version: 1 });
    }
    expect(reads()).toEqual(['contacts_lookup', 'contacts_external']);
  });

  it('an upsert drops the number\'s entries itself (read-your-writes when a worker process applies the projection)', async () => {
    // Here this process applies the projection, so its marks bypass the cache for 2 s and the notification drops
    // the entries. Without both (notifications swallowed, marks waited out), the upsert's own drop is what is left.
    const cache = contactCacheOf(t.app, t.services.pool);
    await settleMarks();
    expect((await lookup('+5491177770005')).json().contact.fullName).toBe('Eli');
    expect(field((await get('+5491177770005')).json(), 'visits')).toMatchObject({ value: [7] });
    const notifications = jest.spyOn(cache as unknown as { invalidate(payload: string): void }, 'invalidate').mockImplementation(() => undefined);
    try {
      expect((await upsert({ phone: '+5491177770005', full_name: 'Eli P', custom_fields: [{ key: 'visits', value: [8] }] })).statusCode).toBe(200);
      await settleMarks();
      expect((await lookup('+5491177770005')).json().contact.fullName).toBe('Eli P');
      expect(field((await get('+5491177770005')).json(), 'visits')).toMatchObject({ value: [8], version: 2 });
    } finally {
      notifications.mockRestore();
    }
  });

  it('a created contact is found at once, though its number was cached as not found', async () => {
    expect((await lookup('+5491177770010')).json().found).toBe(false);
    expect((await get('+5491177770010')).json().found).toBe(false);
    expect((await upsert({ phone: '+5491177770010', full_name: 'Eva' })).statusCode).toBe(201);
    expect((await lookup('+5491177770010')).json()).toMatchObject({ found: true, contact: { fullName: 'Eva' } });
    expect((await get('+5491177770010')).json()).toMatchObject({ found: true, contact: { full_name: 'Eva' } });
  });

  it('an inbound reply is visible to the next lookup (session window opens)', async () => {
    const before = (await lookup('+5491177770004')).json();
    expect(before).toMatchObject({ found: true, hasReplied: false, sessionWindowActive: false, sessionExpiresAt: null });
    await settleMarks();
    expect((await lookup('+5491177770004')).json().hasReplied).toBe(false); // cached
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-03-01T11:30:00Z', contactPhone: '541177770004' });
    await settle(t.services);
    expect((await lookup('+5491177770004')).json()).toMatchObject({
      hasReplied: true, lastReplyAt: '2026-03-01T11:30:00.000Z', sessionWindowActive: true, sessionExpiresAt: '2026-03-02T11:30:00.000Z',
    });
    // a reply sent under the contact's id counts too
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-03-01T11:45:00Z', contactId: 9104 });
    await settle(t.services);
    expect((await lookup('+5491177770004')).json().lastReplyAt).toBe('2026-03-01T11:45:00.000Z');
  });

  it('the session window and expiring values are computed when read, from the cached entry', async () => {
    await settleMarks();
    queries = [];
    const at = (iso: string) => clock.set(iso);
    expect((await lookup('+5491177770002')).json()).toMatchObject({ sessionWindowActive: true, sessionExpiresAt: '2026-03-02T10:00:00.000Z' });
    expect(field((await get('+5491177770002')).json(), 'plan')).toMatchObject({ value: ['gold'], version: 1, expires_at: '2026-03-01T18:00:00.000Z' });
    at('2026-03-01T18:00:00.000Z'); // the value expires
    expect(field((await get('+5491177770002')).json(), 'plan')).toMatchObject({ value: null, version: 1, expires_at: '2026-03-01T18:00:00.000Z' });
    expect((await lookup('+5491177770002')).json().sessionWindowActive).toBe(true);
    at('2026-03-02T10:00:00.000Z'); // the window closes
    expect((await lookup('+5491177770002')).json()).toMatchObject({ sessionWindowActive: false, sessionExpiresAt: '2026-03-02T10:00:00.000Z' });
    at('2026-03-01T17:59:59.999Z'); // an earlier clock sees the value again
    expect(field((await get('+5491177770002')).json(), 'plan')).toMatchObject({ value: ['gold'] });
    expect((await lookup('+5491177770002')).json().sessionWindowActive).toBe(true);
    expect(reads()).toEqual(['contacts_lookup', 'contacts_external']);
  });

  it('a change notified by another process drops the number\'s entries when the notification arrives', async () => {
    await settleMarks();
    expect((await lookup('+5491177770001')).json().contact.fullName).toBe('Ana');
    await t.db.pool.query(
      `UPDATE rm_contacts.contacts SET full_name = 'Ana Maria' WHERE company_id = 101 AND contact_id = 9101
       RETURNING pg_notify('${CONTACTS_CHANGED_CHANNEL}', company_id || ':' || phone)`,
    );
    // when it arrives: within 20 s here (100 reads, about 1 s, before: a loaded machine can be slower), well inside the
    // cache's 60-s backstop, the bound of a cache that missed it
    expect(await eventually(async () => (await lookup('541177770001')).json().contact.fullName, 'Ana Maria')).toBe('Ana Maria');
  });

  it('a renamed list (a company-wide change) is visible to the next lookup', async () => {
    expect((await lookup('+5491177770001')).json().contact.contactListName).toBe('Patients');
    await appendEvents(t.services, 'company-101', [{ type: 'ContactListChanged', data: { companyId: 101, listId: 11, name: 'Pacientes', isDefault: true } }], 101);
    await settle(t.services);
    expect((await lookup('+5491177770001')).json().contact.contactListName).toBe('Pacientes');
  });

  it('while the LISTEN connection is down every read queries (and sees unnotified changes)', async () => {
    const cache = contactCacheOf(t.app, t.services.pool);
    await settleMarks();
    expect((await lookup('+5491177770001')).json().found).toBe(true);
    await cache.stop();
    expect(cache.active).toBe(false);
    queries = [];
    await t.db.pool.query(`UPDATE rm_contacts.contacts SET full_name = 'Unnotified' WHERE company_id = 101 AND contact_id = 9101`);
    expect((await lookup('+5491177770001')).json().contact.fullName).toBe('Unnotified');
    expect((await lookup('+5491177770001')).json().contact.fullName).toBe('Unnotified');
    expect(reads()).toEqual(['contacts_lookup', 'contacts_lookup']);
    await cache.start();
    expect(cache.active).toBe(true);
    queries = [];
    for (let i = 0; i < 2; i++) expect((await lookup('+5491177770001')).json().contact.fullName).toBe('Unnotified');
    expect(reads()).toEqual(['contacts_lookup']);
  });

  it('a lost LISTEN connection is noticed: the cache is bypassed until it reconnects', async () => {
    const cache = contactCacheOf(t.app, t.services.pool);
    await settleMarks();
    await lookup('+5491177770001');
    // its own backend, by pid: found by its last statement (LISTEN ...), it was missed once the listener's heartbeat
    // (SELECT 1, 15 s after it connected) had run, as a slow run of the tests before this one could let it
    const listenerPid = (cache as unknown as { listener: { connection?: { processID?: number } } }).listener.connection?.processID;
    expect(listenerPid).toEqual(expect.any(Number));
    await t.db.pool.query('SELECT pg_terminate_backend($1)', [listenerPid]);
    expect(await eventually(async () => cache.active, false)).toBe(false);
    expect(cache.size).toBe(0); // what was cached is dropped
    expect(await eventually(async () => cache.active, true)).toBe(true); // reconnected (after 1 s)
    await lookup('+5491177770001');
    queries = [];
    await lookup('+5491177770001');
    expect(reads()).toEqual([]);
  });
});
