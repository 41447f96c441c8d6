import { contactPhoneStreamId, contactStreamId } from '../../src/commands/contact/decider';
import { upsertUnlocked } from '../../src/commands/contact/handler';
import { parseUpsertBody } from '../../src/commands/contact/upsert-input';
import { createTestApp } from '../support/services';
import { KEY_101, provisionAll } from './contacts-support';

// Concurrent upserts of one number: one contact, consecutive versions, a final value among the inputs.

const N = 50;

describe('concurrent upserts of one new number', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp();
    await provisionAll(t.services);
  });
  afterAll(() => t.close());

  async function assertOneContact(phone: string, ids: number[], inputs: number[]) {
    expect(new Set(ids).size).toBe(1);
    const contactId = ids[0];
    const claims = await t.services.store.readStream(contactPhoneStreamId(101, phone));
    expect(claims.map((e) => [e.type, (e.data as { contactId: number }).contactId])).toEqual([['ContactPhoneClaimed', contactId]]);
    const events = await t.services.store.readStream(contactStreamId(101, contactId));
    expect(events.filter((e) => e.type === 'ContactCreated')).toHaveLength(1);
    const versions = events.filter((e) => e.type === 'CustomFieldValueSet' && (e.data as { fieldId: number }).fieldId === 502)
      .map((e) => e.data as { version: number; value: number[] });
    // consecutive, no gaps: 1..n (every call brought a value different from the one before it)
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: versions.length }, (_, i) => i + 1));
    expect(versions.length).toBe(N);
    const final = versions[versions.length - 1].value[0];
    expect(inputs).toContain(final);
    // the read model agrees: one contact with the number, holding the last version
    const rows = await t.services.pool.query(
      `SELECT c.contact_id, v.version, v.value FROM rm_contacts.contacts c
         JOIN rm_contacts.field_values v ON v.company_id = c.company_id AND v.contact_id = c.contact_id AND v.field_id = 502
        WHERE c.company_id = 101 AND c.phone = $1`, [phone],
    );
    expect(rows.rows).toEqual([{ contact_id: contactId, version: N, value: [final] }]);
    return contactId;
  }

  it('through the API: exactly one 201, the others update that contact', async () => {
    // the in-process lock answers the 50 one after the other, each once the read models have it (read-your-writes); the
    // log is read only below the cluster's oldest running transaction (test databases share one cluster; other suites
    // hold transactions open): each may wait ~1 s, past jest's 60 s
    const phone = '+5491170005001';
    const inputs = Array.from({ length: N }, (_, i) => i + 1);
    const responses = await Promise.all(inputs.map((i) =>
      t.app.inject({
        method: 'POST', url: '/api/v1/external/contacts/upsert/', headers: { 'x-api-key': KEY_101 },
        payload: { phone: i % 2 ? '011 15 7000-5001' : phone, custom_fields: [{ key: 'visits', value: [i] }] },
      })));
    expect(responses.map((r) => r.statusCode).sort((a, b) => a - b)).toEqual([...Array(N - 1).fill(200), 201]);
    expect(responses.filter((r) => r.json().created)).toHaveLength(1);
    await assertOneContact(phone, responses.map((r) => r.json().contact.id), inputs);
  }, 240_000);

  it('without the in-process lock (as from several processes): the event store serialises them', async () => {
    const phone = '+5491170005002';
    const inputs = Array.from({ length: N }, (_, i) => 100 + i);
    const results = await Promise.all(inputs.map((v) =>
      upsertUnlocked(t.services, 101, parseUpsertBody({ phone, custom_fields: [{ key: 'visits', value: [v] }] }), { actor: 'test', companyId: 101 })));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const contactId = await assertOneContact(phone, results.map((r) => r.contact.contactId), inputs);

    // repeated identical upserts (also concurrent) create no versions
    const before = (await t.services.store.readStream(contactStreamId(101, contactId))).length;
    const last = (await t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } })).json();
    const value = last.contact.custom_fields[1].value;
    const same = await Promise.all(Array.from({ length: 20 }, () =>
      upsertUnlocked(t.services, 101, parseUpsertBody({ phone, custom_fields: [{ key: 'visits', value }] }), { actor: 'test', companyId: 101 })));
    expect(same.every((r) => !r.created && r.versionedCustomFields.length === 0)).toBe(true);
    expect((await t.services.store.readStream(contactStreamId(101, contactId))).length).toBe(before);
  });
});
