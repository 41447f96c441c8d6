import { seedFixtureContacts, type FixtureContact } from '../../src/commands/contact/fixture';
import { upsertContact } from '../../src/commands/contact/handler';
import { parseUpsertBody } from '../../src/commands/contact/upsert-input';
import { START, type RecordedEvent } from '../../src/ports/event-store';
import { contactsProjection } from '../../src/projections/contacts/projection';
import type { Projection } from '../../src/projections/projection';
import { checksumProjection } from '../../src/projections/rebuild';
import { chunksOf, fillProjection } from '../support/projections';
import { createTestContext } from '../support/services';
import { appendEvents, provisionAll, recordMessage, settle, testClock } from './contacts-support';

// The contacts projection's applyBatch leaves exactly the rows of apply one event at a time: over a log mixing
// every event it handles (lists, fields, claims, creations, profile changes, versions set and cleared, replies by
// number and by contact id, outbound messages), in batches of every size, with batches delivered again and
// events delivered twice within one batch.

const contact = (over: Partial<FixtureContact>): FixtureContact => ({
  contactListId: 11, fullName: null, phone: '', email: null, source: 'manual', sourceDetail: null, profilePicture: null,
  isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [], ...over,
});

describe('contacts projection: applyBatch equals apply one event at a time', () => {
  let t: Awaited<ReturnType<typeof createTestContext>>;
  let log: RecordedEvent[];
  const clock = testClock('2026-03-01T12:00:00.000Z');

  beforeAll(async () => {
    t = await createTestContext({ now: clock.now });
    await provisionAll(t.services);
    const up = (body: object, actor = 'key_a') => upsertContact(t.services, 101, parseUpsertBody(body), { actor, companyId: 101 });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-02-27T10:00:00Z', contactPhone: '011 15 6100-0001' });
    await up({ phone: '+5491161000001', full_name: 'Ana', custom_fields: [{ key: 'plan', value: ['gold'] }, { key: 'visits', value: [1] }] });
    clock.advance(1000);
    await up({ phone: '+5491161000001', full_name: 'Ana P', email: 'ana@example.com', custom_fields: [{ key: 'visits', value: [2], expires_at: '2026-04-01T00:00:00Z' }] }, 'key_b');
    clock.advance(1000);
    await up({ phone: '+5491161000001', custom_fields: [{ key: 'plan', value: [] }, { key: 'allergies', value: ['pollen', 'latex'] }] });
    await up({ phone: '+5491161000002', contact_list_id: 12, custom_fields: [{ key: 'score', value: [5] }] });
    await seedFixtureContacts(t.services, 101, [
      contact({ id: 9201, fullName: 'Test', phone: '+5491161000003', isTest: true, customFields: [{ key: 'visits', value: [9], expiresAt: '2026-01-01T00:00:00Z' }] }),
      contact({ id: 9202, fullName: 'Dup A', phone: '+5491161000004' }),
      contact({ id: 9203, fullName: 'Dup B', phone: '+5491161000004', contactListId: 12 }),
    ], { actor: 'cli', correlationId: 'seed' });
    await seedFixtureContacts(t.services, 101, [contact({ id: 9201, fullName: 'Not a test any more', phone: '+5491161000003', isTest: false })], { actor: 'cli', correlationId: 'seed2' });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-03-01T09:00:00Z', contactPhone: '+5491161000001' });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-02-28T09:00:00Z', contactPhone: '541161000001' });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-03-01T08:00:00Z', contactId: 9202 });
    await recordMessage(t.services, { companyId: 101, direction: 'inbound', occurredAt: '2026-03-01T07:00:00Z', contactId: 9202, contactPhone: '+5491161000004' });
    await recordMessage(t.services, { companyId: 101, direction: 'outbound', occurredAt: '2026-03-01T11:00:00Z', contactPhone: '+5491161000002' });
    await recordMessage(t.services, { companyId: 202, direction: 'inbound', occurredAt: '2026-03-01T11:00:00Z', contactId: 4242 });
    await appendEvents(t.services, 'company-101', [
      { type: 'ContactListChanged', data: { companyId: 101, listId: 12, name: 'Leads 2', isDefault: true } },
      { type: 'CustomFieldChanged', data: { companyId: 101, listId: 12, fieldId: 521, key: 'score', name: 'Score 2', fieldType: 'int', options: null, required: true, group: null } },
    ], 101);
    await up({ phone: '+5491161000002', full_name: 'Leo', custom_fields: [{ key: 'score', value: [6] }] });
    await settle(t.services);
    log = (await t.services.store.readAll(START, 100_000)).events;
  }, 60_000);
  afterAll(() => t?.close());

  const fill = (p: Projection, schema: string, batches: RecordedEvent[][]) => fillProjection(t.services.pool, p, schema, batches);
  const chunks = chunksOf;
  const p = contactsProjection;

  it('the log holds every kind of event the projection handles', () => {
    const types = new Set(log.filter((e) => p.handles.includes(e.type)).map((e) => e.type));
    expect([...types].sort()).toEqual([...p.handles].sort());
  });

  it('every batch size, a batch delivered again and events delivered twice in a batch give the rows of apply', async () => {
    const oneByOne = { ...p, applyBatch: undefined };
    await fill(oneByOne, 'rm_contacts__one', chunks(log, 1));
    const expected = await checksumProjection(t.services.pool, p, 'rm_contacts__one');
    expect(await checksumProjection(t.services.pool, p)).toBe(expected); // the live read model, filled by the runner in batches
    for (const size of [log.length, 2, 3, 5, 8]) {
      const batches = chunks(log, size);
      batches.splice(Math.floor(batches.length / 2), 0, batches[Math.floor(batches.length / 3)]); // one batch again, later
      await fill(p, 'rm_contacts__batch', batches);
      expect([size, await checksumProjection(t.services.pool, p, 'rm_contacts__batch')]).toEqual([size, expected]);
    }
    // each event twice in a row, in one batch; and the whole log again on top
    await fill(p, 'rm_contacts__batch', [log.flatMap((e) => [e, e]), log]);
    expect(await checksumProjection(t.services.pool, p, 'rm_contacts__batch')).toBe(expected);
    // one by one, redelivered, on top of the batch result
    await fill(oneByOne, 'rm_contacts__one', [log, ...chunks(log, 1)]);
    expect(await checksumProjection(t.services.pool, p, 'rm_contacts__one')).toBe(expected);
  });

  it('the rows are the ones expected (not merely the same both ways)', async () => {
    const rows = async (sql: string) => (await t.services.pool.query(sql)).rows;
    expect(await rows(`SELECT contact_id, full_name, email, is_test, revision::int FROM rm_contacts.contacts WHERE company_id = 101 ORDER BY contact_id`)).toEqual(
      expect.arrayContaining([
        { contact_id: 9201, full_name: 'Not a test any more', email: null, is_test: false, revision: 2 },
        { contact_id: 9202, full_name: 'Dup A', email: null, is_test: false, revision: 0 },
      ]),
    );
    const ana = (await rows(`SELECT contact_id, full_name, email, revision::int FROM rm_contacts.contacts WHERE phone = '+5491161000001'`))[0];
    expect(ana).toMatchObject({ full_name: 'Ana P', email: 'ana@example.com', revision: 6 });
    expect(await rows(`SELECT field_id, version, value FROM rm_contacts.field_values WHERE contact_id = ${ana.contact_id} ORDER BY field_id`)).toEqual([
      { field_id: 501, version: 2, value: null },
      { field_id: 502, version: 2, value: [2] },
      { field_id: 503, version: 1, value: ['latex', 'pollen'] },
    ]);
    expect(await rows(`SELECT phone, contact_id, is_test FROM rm_contacts.phone_claims WHERE phone IN ('+5491161000003', '+5491161000004') ORDER BY contact_id`)).toEqual([
      { phone: '+5491161000003', contact_id: 9201, is_test: true },
      { phone: '+5491161000004', contact_id: 9202, is_test: false },
      { phone: '+5491161000004', contact_id: 9203, is_test: false },
    ]);
    expect(await rows(`SELECT phone, last_reply_at FROM rm_contacts.replies_by_phone WHERE company_id = 101 ORDER BY phone`)).toEqual([
      { phone: '+5491161000001', last_reply_at: new Date('2026-03-01T09:00:00Z') },
      { phone: '+5491161000004', last_reply_at: new Date('2026-03-01T07:00:00Z') },
    ]);
    expect(await rows(`SELECT company_id, contact_id, last_reply_at FROM rm_contacts.replies_by_contact ORDER BY company_id`)).toEqual([
      { company_id: 101, contact_id: 9202, last_reply_at: new Date('2026-03-01T08:00:00Z') },
      { company_id: 202, contact_id: 4242, last_reply_at: new Date('2026-03-01T11:00:00Z') },
    ]);
    expect(await rows(`SELECT list_id, name, is_default FROM rm_contacts.lists WHERE company_id = 101 ORDER BY list_id`)).toEqual([
      { list_id: 11, name: 'Patients', is_default: false },
      { list_id: 12, name: 'Leads 2', is_default: true },
    ]);
  });
});
