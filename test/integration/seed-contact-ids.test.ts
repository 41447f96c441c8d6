import { contactStreamId } from '../../src/commands/contact/decider';
import { foldContact } from '../../src/commands/contact/handler';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestContext, type TestContext } from '../support/services';
import { EXAMPLE, exampleFixture } from '../support/provisioning';

// Fixture contacts without an id get generated ids; those must never be ids the same fixture gives its other
// contacts, wherever in the list those come (found in review: an id-less contact listed before `id: 1` took id 1).

const contact = (phone: string, id?: number) => ({
  ...(id === undefined ? {} : { id }),
  contactListId: 11,
  phone,
  createdAt: '2026-01-10T12:00:00Z',
});

describe('seedFixture: generated contact ids', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext();
  });
  afterAll(async () => {
    await t?.close();
  });

  it("an id-less contact listed before an explicit id never takes that id; the seed is valid, and idempotent", async () => {
    const doc = exampleFixture();
    doc.companies[0].contacts = [contact('+5491155550001'), contact('+5491155550002', 1), contact('+5491155550003', 3)];

    const first = await seedFixture(t.services, doc, { actor: 'test' });
    expect(first.contacts).toEqual({ created: 3, changed: 0, unchanged: 0 });

    const explicit = foldContact(await t.services.store.readStream(contactStreamId(EXAMPLE.companyId, 1)));
    expect(explicit).toMatchObject({ exists: true, contactId: 1, phone: '+5491155550002' });
    const generated = await t.db.pool.query<{ id: string }>(
      `SELECT DISTINCT (regexp_match(stream_id, '^contact-${EXAMPLE.companyId}-(\\d+)$'))[1] AS id FROM es.events WHERE stream_id ~ '^contact-${EXAMPLE.companyId}-'`,
    );
    const ids = generated.rows.map((r) => Number(r.id)).sort((a, b) => a - b);
    expect(ids).toHaveLength(3);
    expect(ids.slice(0, 2)).toEqual([1, 3]);
    expect(ids[2]).toBeGreaterThan(3);

    const second = await seedFixture(t.services, doc, { actor: 'test' });
    expect(second.contacts).toEqual({ created: 0, changed: 0, unchanged: 3 });
  });
});
