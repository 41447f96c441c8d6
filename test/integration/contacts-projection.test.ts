import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FixtureContactsError, seedFixtureContacts, type FixtureContact } from '../../src/commands/contact/fixture';
import { contactStreamId } from '../../src/commands/contact/decider';
import { upsertContact } from '../../src/commands/contact/handler';
import { parseUpsertBody } from '../../src/commands/contact/upsert-input';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { START } from '../../src/ports/event-store';
import { contactsProjection } from '../../src/projections/contacts/projection';
import { findContactsByPhone, getFieldHistory, lookupContact } from '../../src/projections/contacts/queries';
import { checksumProjection, rebuildProjection } from '../../src/projections/rebuild';
import { withTransaction } from '../../src/shared/tx';
import { createTestApp } from '../support/services';
import { provisionAll, recordMessage, settle, testClock } from './contacts-support';

const countEvents = async (t: { services: { pool: import('pg').Pool } }) =>
  Number((await t.services.pool.query('SELECT count(*) AS n FROM es.events')).rows[0].n);

const fixtureContact = (over: Partial<FixtureContact>): FixtureContact => ({
  contactListId: 11, fullName: null, phone: '', email: null, source: 'manual', sourceDetail: null, profilePicture: null,
  isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [], ...over,
});
const ctx = { actor: 'cli', correlationId: 'seed-test' };

describe('contacts read model', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
  });
  afterAll(() => t.close());

  it('applying every event a second time changes nothing; an old version redelivered never regresses', async () => {
    for (const [i, v] of [[1, 'basic'], [2, 'gold'], [3, 'basic']] as const) {
      await upsertContact(t.services, 101, parseUpsertBody({ phone: '+5491171110001', full_name: `n${i}`, custom_fields: [{ key: 'plan', value: [v] }] }), { actor: 'key_a', companyId: 101 });
    }
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-02-27T10:00:00Z', contactPhone: '+5491171110001' });
    await settle(t.services);
    const before = await checksumProjection(t.services.pool, contactsProjection);
    const all = await t.services.store.readAll(START, 100_000);
    await withTransaction(t.services.pool, async (tx) => {
      await tx.query(`SET LOCAL search_path TO ${contactsProjection.schema}, public`);
      for (const e of all.events) if (contactsProjection.handles.includes(e.type)) await contactsProjection.apply(tx, e);
    });
    expect(await checksumProjection(t.services.pool, contactsProjection)).toBe(before);
  });

  it('a rebuild from position zero gives the same tables', async () => {
    const live = await checksumProjection(t.services.pool, contactsProjection);
    await rebuildProjection(t.services.pool, t.services.store, contactsProjection, {});
    expect(await checksumProjection(t.services.pool, contactsProjection)).toBe(live);
  });

  it('keeps the version history per field (value, expiry, time, actor), the same as the event log', async () => {
    const phone = '+5491171110002';
    const up = (body: object, actor: string) => upsertContact(t.services, 101, parseUpsertBody({ phone, ...body }), { actor, companyId: 101 });
    const a = await up({ custom_fields: [{ key: 'visits', value: [1] }] }, 'key_a');
    clock.advance(60_000);
    await up({ custom_fields: [{ key: 'visits', value: [1], expires_at: '2026-04-01T00:00:00Z' }] }, 'key_b');
    clock.advance(60_000);
    await up({ custom_fields: [{ key: 'visits', value: [] }] }, 'key_c');
    const id = a.contact.contactId;
    const history = await getFieldHistory(t.services.pool, 101, id, 502);
    expect(history).toEqual([
      { fieldId: 502, version: 1, value: [1], expiresAt: null, at: '2026-03-01T12:00:00.000Z', actor: 'key_a' },
      { fieldId: 502, version: 2, value: [1], expiresAt: '2026-04-01T00:00:00.000Z', at: '2026-03-01T12:01:00.000Z', actor: 'key_b' },
      { fieldId: 502, version: 3, value: null, expiresAt: null, at: '2026-03-01T12:02:00.000Z', actor: 'key_c' },
    ]);
    const log = (await t.services.store.readStream(contactStreamId(101, id)))
      .filter((e) => e.type.startsWith('CustomFieldValue'))
      .map((e) => ({ type: e.type, data: e.data, at: e.metadata.at, actor: e.metadata.actor }));
    expect(log).toEqual([
      { type: 'CustomFieldValueSet', data: { companyId: 101, contactId: id, fieldId: 502, key: 'visits', version: 1, value: [1], expiresAt: null }, at: '2026-03-01T12:00:00.000Z', actor: 'key_a' },
      { type: 'CustomFieldValueSet', data: { companyId: 101, contactId: id, fieldId: 502, key: 'visits', version: 2, value: [1], expiresAt: '2026-04-01T00:00:00.000Z' }, at: '2026-03-01T12:01:00.000Z', actor: 'key_b' },
      { type: 'CustomFieldValueCleared', data: { companyId: 101, contactId: id, fieldId: 502, key: 'visits', version: 3 }, at: '2026-03-01T12:02:00.000Z', actor: 'key_c' },
    ]);
  });

  it('findContactsByPhone (for sends) matches every variant, test contacts included', async () => {
    await seedFixtureContacts(t.services, 101, [fixtureContact({ id: 7001, fullName: 'Test', phone: '+5491171110003', isTest: true })], ctx);
    expect(await findContactsByPhone(t.services.pool, 101, '+541171110003')).toEqual([{ id: 7001, fullName: 'Test', phone: '+5491171110003', isTest: true }]);
    expect(await findContactsByPhone(t.services.pool, 202, '+5491171110003')).toEqual([]);
  });

  it('reply stats by phone arrive before the contact exists and count once it does', async () => {
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-02-28T09:00:00Z', contactPhone: '011 15 7111-0004' });
    await settle(t.services);
    expect(await lookupContact(t.services.pool, 101, '+5491171110004')).toEqual({ contact: null, lastReplyAt: null });
    await upsertContact(t.services, 101, parseUpsertBody({ phone: '+5491171110004' }), { actor: 'k', companyId: 101 });
    expect((await lookupContact(t.services.pool, 101, '+5491171110004')).lastReplyAt).toEqual(new Date('2026-02-28T09:00:00Z'));
  });
});

describe('seedFixtureContacts', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2026-03-01T12:00:00Z') });
    await provisionAll(t.services);
  });
  afterAll(() => t.close());

  const contacts = (): FixtureContact[] => [
    fixtureContact({
      id: 9001, fullName: 'Juan Perez', phone: '011 15 5555-1234', email: 'juan@example.com',
      customFields: [
        { key: 'plan', value: ['gold'], expiresAt: null },
        { key: 'guardian_name', value: ['Eva'], expiresAt: null },
        { key: 'visits', value: [3], expiresAt: '2026-01-01T00:00:00Z' },
      ],
    }),
    fixtureContact({ fullName: 'No id', phone: '+54 9 11 5555-7777', contactListId: 12, customFields: [{ key: 'score', value: [7], expiresAt: null }] }),
  ];

  it('creates, then appends nothing for the same document, then only the differences', async () => {
    expect(await seedFixtureContacts(t.services, 101, contacts(), ctx)).toEqual({ created: 2, changed: 0, unchanged: 0 });
    const events = await countEvents(t);
    expect(await seedFixtureContacts(t.services, 101, contacts(), ctx)).toEqual({ created: 0, changed: 0, unchanged: 2 });
    expect(await countEvents(t)).toBe(events);

    const changed = contacts();
    changed[0].fullName = 'Juan P.';
    changed[1].customFields = [{ key: 'score', value: [8], expiresAt: null }];
    expect(await seedFixtureContacts(t.services, 101, changed, ctx)).toEqual({ created: 0, changed: 2, unchanged: 0 });
    expect(await countEvents(t)).toBe(events + 2); // a profile change and a version of score

    const juan = await lookupContact(t.services.pool, 101, '+5491155551234');
    expect(juan.contact).toMatchObject({ id: 9001, fullName: 'Juan P.', phone: '+5491155551234', contactListId: 11 });
    const noId = await findContactsByPhone(t.services.pool, 101, '+5491155557777');
    expect(noId).toHaveLength(1);
  });

  it('generated ids stay above the fixture ids', async () => {
    await seedFixtureContacts(t.services, 101, contacts(), ctx); // the fixture's id 9001 (nothing new if seeded above)
    const r = await upsertContact(t.services, 101, parseUpsertBody({ phone: '+5491171119999' }), { actor: 'k', companyId: 101 });
    expect(r.contact.contactId).toBeGreaterThan(9001);
  });

  it('rejects invalid contacts as a whole, naming each path; nothing is appended', async () => {
    const events = await countEvents(t);
    const bad = [
      fixtureContact({ id: 9500, phone: '+5491171118888' }),
      fixtureContact({ id: 9501, phone: 'not a phone' }),
      fixtureContact({ id: 9502, phone: '+5491171118887', customFields: [{ key: 'plan', value: ['platinum'], expiresAt: null }] }),
      fixtureContact({ id: 9001, phone: '+5491171118886' }),
    ];
    const err = await seedFixtureContacts(t.services, 101, bad, ctx).catch((e) => e);
    expect(err).toBeInstanceOf(FixtureContactsError);
    expect(err.problems).toEqual([
      { path: 'contacts[1].phone', message: '"not a phone" is not a valid phone number' },
      { path: 'contacts[2].customFields', message: 'custom_fields[0] ("plan"): value must be one of ["basic","gold"]' },
      { path: 'contacts[3].phone', message: "contact 9001 has the number +5491155551234; a contact's phone cannot change" },
    ]);
    expect(await countEvents(t)).toBe(events);
  });

});

describe('the provisioning seed (switchboard seed) with the example fixture', () => {
  it('seeds its contact through seedFixtureContacts, idempotently', async () => {
    const t = await createTestApp();
    try {
      const doc = JSON.parse(readFileSync(join(__dirname, '../fixtures/example-fixture.json'), 'utf8'));
      const first = await seedFixture(t.services, doc, { actor: 'cli' });
      expect(first.contacts).toEqual({ created: 1, changed: 0, unchanged: 0 });
      const second = await seedFixture(t.services, doc, { actor: 'cli' });
      expect(second.contacts).toEqual({ created: 0, changed: 0, unchanged: 1 });
      expect(second.appended).toBe(0);
      const juan = await lookupContact(t.services.pool, 101, '+5491155551234');
      expect(juan.contact).toMatchObject({ id: 9001, fullName: 'Juan Perez', contactListId: 11, contactListName: 'Patients', phone: '+5491155551234' });
    } finally {
      await t.close();
    }
  });
});
