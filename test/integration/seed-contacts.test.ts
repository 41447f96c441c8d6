// The fixture's contacts are validated by the seed, then handed to the contacts feature's seedFixtureContacts
// (mocked here: that feature is built separately and has its own tests).
jest.mock('../../src/commands/contact/fixture', () => ({
  ...jest.requireActual('../../src/commands/contact/fixture'),
  seedFixtureContacts: jest.fn(async (_s: unknown, _companyId: number, contacts: unknown[]) => ({ created: contacts.length, changed: 0, unchanged: 0 })),
}));

import { seedFixtureContacts } from '../../src/commands/contact/fixture';
import { formatSeedSummary, seedFixture } from '../../src/commands/provisioning/seed';
import { getContactLists } from '../../src/projections/business/queries';
import { createTestContext, type TestContext } from '../support/services';
import { exampleFixture, secondCompany } from '../support/provisioning';

describe('seedFixture: contacts', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('passes each company validated contacts (defaults filled) after its lists are in the read model', async () => {
    const mock = seedFixtureContacts as jest.Mock;
    mock.mockImplementationOnce(async (s, companyId, contacts) => {
      // the contacts feature loads the company's lists from the read model: they must already be there
      expect(await getContactLists(s.pool, companyId)).toHaveLength(2);
      return { created: contacts.length, changed: 0, unchanged: 0 };
    });
    const doc = exampleFixture({ keepContacts: true });
    const second = secondCompany();
    second.contacts = [{ contactListId: 21, phone: '+5491149990099', createdAt: '2026-02-01T00:00:00Z' }];
    doc.companies.push(second);

    const summary = await seedFixture(t.services, doc, { actor: 'test' });
    expect(formatSeedSummary(summary)).toBe('seeded 2 companies: appended 31 events, unchanged 0 of 8 aggregates; contacts: created 2, changed 0, unchanged 0');
    expect(mock).toHaveBeenCalledTimes(2);
    expect(mock.mock.calls[0].slice(1)).toEqual([
      101,
      [{
        id: 9001, contactListId: 11, fullName: 'Juan Perez', phone: '011 15 5555-1234', email: 'juan@example.com', source: 'manual',
        sourceDetail: null, profilePicture: null, isTest: false, createdAt: '2026-01-10T12:00:00Z',
        customFields: [{ key: 'plan', value: ['gold'], expiresAt: null }],
      }],
      { actor: 'test', correlationId: expect.any(String) },
    ]);
    expect(mock.mock.calls[1].slice(1, 3)).toEqual([
      202,
      [{
        contactListId: 21, fullName: null, phone: '+5491149990099', email: null, source: 'manual', sourceDetail: null,
        profilePicture: null, isTest: false, createdAt: '2026-02-01T00:00:00Z', customFields: [],
      }],
    ]);
  });
});
