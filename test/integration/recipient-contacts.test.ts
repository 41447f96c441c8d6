import { seedFixture } from '../../src/commands/provisioning/seed';
import { findContactForRecipient, findContactsForRecipients } from '../../src/projections/sends/contacts';
import { createTestApp } from '../support/services';
import { OTHER, SHOP, sendsFixture } from '../support/sends';

// The webhook fan-out looks up a batch's recipients in one query (findContactsForRecipients); it must choose what
// the one-recipient lookup of the status record chooses: phone variants, a test contact only when no other
// matches, the company's own contacts only.

describe('recipient contacts in one query', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const TEST_ONLY = { id: 7002, fullName: 'Prueba', phone: '+5491166660000' };

  beforeAll(async () => {
    t = await createTestApp();
    const fixture = sendsFixture();
    fixture.companies[0].contacts.push({
      id: TEST_ONLY.id, contactListId: 3001, fullName: TEST_ONLY.fullName, phone: TEST_ONLY.phone, email: null, source: 'manual',
      sourceDetail: null, profilePicture: null, isTest: true, createdAt: '2026-01-02T00:00:00Z', customFields: [],
    });
    await seedFixture(t.services, fixture, { actor: 'test' });
  });
  afterAll(async () => t?.close());

  it('chooses per recipient what the single lookup chooses', async () => {
    const recipients = [
      { companyId: SHOP.companyId, e164: '+5491155551234' }, // stored under the variant without the 9
      { companyId: SHOP.companyId, e164: TEST_ONLY.phone }, // only a test contact matches
      { companyId: OTHER.companyId, e164: '+5491155551234' }, // another company's contact is not this one's
      { companyId: SHOP.companyId, e164: '+5491100000000' }, // nobody
      { companyId: SHOP.companyId, e164: '+5491155551234' }, // twice in one batch
    ];
    const batch = await findContactsForRecipients(t.services.pool, recipients);
    for (const r of recipients) {
      expect(batch.get(`${r.companyId}:${r.e164}`) ?? null).toEqual(await findContactForRecipient(t.services.pool, r.companyId, r.e164));
    }
    expect(batch.get(`${SHOP.companyId}:+5491155551234`)).toEqual({ id: SHOP.contact.id, fullName: SHOP.contact.fullName });
    expect(batch.get(`${SHOP.companyId}:${TEST_ONLY.phone}`)).toEqual({ id: TEST_ONLY.id, fullName: TEST_ONLY.fullName });
    expect(batch.size).toBe(2);
  });

  it('answers an empty batch without a query', async () => {
    expect((await findContactsForRecipients(t.services.pool, [])).size).toBe(0);
  });
});
