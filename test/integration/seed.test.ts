import { FixtureError } from '../../src/commands/provisioning/fixture';
import { formatSeedSummary, seedFixture } from '../../src/commands/provisioning/seed';
import { getBusinessAccounts } from '../../src/projections/accounts/queries';
import { findApiKeyByHash } from '../../src/projections/apikeys/projection';
import { getContactLists, getCustomFields, getHolidays } from '../../src/projections/business/queries';
import { hashApiKey } from '../../src/shared/api-key';
import { createTestContext, TEST_PEPPER, type TestContext } from '../support/services';
import { countEvents, EXAMPLE, eventTypesAfter, exampleFixture, secondCompany, twoCompanyFixture } from '../support/provisioning';

const NOW = new Date('2026-03-01T10:00:00.000Z');

/** Runs a seed that must fail; returns the issue lines (`path: message`). */
async function rejected(t: TestContext, doc: unknown): Promise<string[]> {
  const before = await countEvents(t.db.pool);
  let caught: unknown;
  try {
    await seedFixture(t.services, doc, { actor: 'test' });
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(FixtureError);
  expect(await countEvents(t.db.pool)).toBe(before); // nothing appended
  return (caught as FixtureError).issues.map((i) => `${i.path}: ${i.message}`);
}

describe('seedFixture', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext({ now: () => NOW });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('provisions the example fixture, then a second identical seed appends nothing', async () => {
    const first = await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    expect(first).toEqual({ companies: 1, appended: 22, aggregates: 5, unchanged: 0, contacts: { created: 0, changed: 0, unchanged: 0 } });
    expect(await eventTypesAfter(t.db.pool, 0)).toEqual([
      'CompanyRegistered', 'UserRegistered', 'ContactListCreated', 'ContactListCreated',
      'CustomFieldDefined', 'CustomFieldDefined', 'CustomFieldDefined', 'CustomFieldDefined', 'CustomFieldDefined',
      'BranchConfigured', 'BranchScheduleSet', 'BranchConfigured', 'HolidayDeclared', 'HolidayDeclared',
      'AgentRegistered', 'OperatorRegistered',
      'PhoneNumberRegistered', 'TemplateRegistered', 'TemplateRegistered',
      'ApiKeyIssued', 'ApiKeyIssued', 'ApiKeyIssued',
    ]);
    const count = await countEvents(t.db.pool);

    const second = await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    expect(second).toEqual({ companies: 1, appended: 0, aggregates: 5, unchanged: 5, contacts: { created: 0, changed: 0, unchanged: 0 } });
    expect(formatSeedSummary(second)).toBe('seeded 1 company: appended 0 events, unchanged 5 of 5 aggregates');
    expect(await countEvents(t.db.pool)).toBe(count);
  });

  it('never stores a clear key: events carry the keyed hash only', async () => {
    const r = await t.db.pool.query(`SELECT data::text AS data FROM es.events WHERE type = 'ApiKeyIssued'`);
    for (const row of r.rows) {
      for (const key of [EXAMPLE.key, EXAMPLE.expiredKey, EXAMPLE.globalKey]) expect(row.data).not.toContain(key);
    }
    const stored = await findApiKeyByHash(t.db.pool, hashApiKey(TEST_PEPPER, EXAMPLE.key));
    expect(stored).toMatchObject({ scope: 'company', companyId: 101, userId: 7, name: 'CRM sync', revoked: false, expiresAt: null });
  });

  it('a changed document appends exactly its differences, and the read models follow', async () => {
    const doc = exampleFixture();
    const company = doc.companies[0];
    company.phoneNumbers[0].messagingLimitTier = 'TIER_1000';
    company.phoneNumbers[0].templates[1].status = 'APPROVED';
    company.holidays.push({
      id: 33, name: 'Año Nuevo', description: 'Closed', date: '2027-01-01', branches: [], attentionTarget: 'ALL',
      hasCustomHours: false, startTime: null, finishAt: null, isActive: true,
    });
    company.apiKeys[1].active = false;
    const before = await countEvents(t.db.pool);

    const summary = await seedFixture(t.services, doc, { actor: 'test' });
    expect(summary).toMatchObject({ appended: 4, aggregates: 5, unchanged: 2 });
    expect(await eventTypesAfter(t.db.pool, before)).toEqual(['HolidayDeclared', 'MessagingTierChanged', 'TemplateStatusChanged', 'ApiKeyRevoked']);

    const accounts = await getBusinessAccounts(t.db.pool, 101, NOW);
    expect(accounts?.phoneNumbers[0].messagingLimitTier).toBe('TIER_1000');
    expect(accounts?.phoneNumbers[0].quota.dailyLimit).toBe(1000);
    expect(accounts?.phoneNumbers[0].templates.map((x) => x.name)).toEqual(['appointment_reminder', 'promo_checkup']);
    expect((await getHolidays(t.db.pool, 101)).map((h) => h.id)).toEqual([32, 31, 33]);
    expect(await findApiKeyByHash(t.db.pool, hashApiKey(TEST_PEPPER, EXAMPLE.expiredKey))).toMatchObject({ revoked: true });

    // and once more: nothing
    const again = await seedFixture(t.services, doc, { actor: 'test' });
    expect(again.appended).toBe(0);
  });

  it('detail changes become *Changed events carrying the full new state', async () => {
    const doc = exampleFixture();
    const c = doc.companies[0];
    c.phoneNumbers[0].messagingLimitTier = 'TIER_1000';
    c.phoneNumbers[0].templates[1].status = 'APPROVED';
    c.apiKeys[1].active = false;
    c.holidays.push({ id: 33, name: 'Año Nuevo', description: 'Closed', date: '2027-01-01', branches: [], attentionTarget: 'ALL', hasCustomHours: false, startTime: null, finishAt: null, isActive: true });
    c.description = 'Outpatient clinic and dentistry';
    c.branches[0].schedules[0].finishAt = '19:00:00';
    c.phoneNumbers[0].templates[0].buttons[0].text = 'Ver mi turno';
    c.phoneNumbers[0].qualityRating = 'YELLOW';
    c.apiKeys[0].expiresAt = '2027-01-01T00:00:00-03:00';
    c.contactLists[0].customFields[0].options = ['basic', 'gold', 'platinum'];
    const before = await countEvents(t.db.pool);
    await seedFixture(t.services, doc, { actor: 'test' });
    const r = await t.db.pool.query('SELECT type, data FROM es.events ORDER BY tx_id, seq OFFSET $1', [before]);
    expect(r.rows.map((x) => x.type)).toEqual([
      'CompanyProfileChanged', 'CustomFieldChanged', 'BranchScheduleSet', 'QualityRatingChanged', 'TemplateChanged', 'ApiKeyExpiryChanged',
    ]);
    expect(r.rows[0].data).toMatchObject({ companyId: 101, name: 'Clinica Norte', description: 'Outpatient clinic and dentistry' });
    expect(r.rows[4].data).toMatchObject({ templateId: 901, status: 'APPROVED', buttons: [{ type: 'URL', text: 'Ver mi turno', url: 'https://clinicanorte.example/t/{{1}}' }] });
    expect(r.rows[5].data).toEqual({ keyId: expect.any(String), expiresAt: '2027-01-01T03:00:00.000Z' });
    const fields = await getCustomFields(t.db.pool, 11);
    expect(fields[0]).toEqual({ id: 501, listId: 11, companyId: 101, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold', 'platinum'], required: false, group: null });
    expect(fields.map((f) => f.group)).toEqual([null, null, null, null, 'guardians']);
  });

  it('absent entities are kept (provisioning never deletes)', async () => {
    const doc = exampleFixture();
    doc.companies[0].holidays = [];
    doc.companies[0].phoneNumbers[0].templates = [];
    doc.companies[0].contactLists = [];
    doc.companies[0].apiKeys = [];
    doc.companies[0].phoneNumbers[0].messagingLimitTier = 'TIER_1000';
    doc.companies[0].phoneNumbers[0].qualityRating = 'YELLOW';
    doc.companies[0].description = 'Outpatient clinic and dentistry';
    doc.companies[0].branches[0].schedules[0].finishAt = '19:00:00';
    doc.companies[0].contactLists = [];
    doc.companies[0].users = [];
    doc.globalKeys = [];
    const before = await countEvents(t.db.pool);
    const summary = await seedFixture(t.services, doc, { actor: 'test' });
    expect(summary.appended).toBe(0);
    expect(await countEvents(t.db.pool)).toBe(before);
    expect((await getHolidays(t.db.pool, 101)).length).toBe(3);
    expect(await getContactLists(t.db.pool, 101)).toEqual([
      { id: 11, companyId: 101, name: 'Patients', isDefault: true },
      { id: 12, companyId: 101, name: 'Leads', isDefault: false },
    ]);
  });

  it('adds a second company next to the first', async () => {
    const before = await countEvents(t.db.pool);
    const doc = exampleFixture();
    doc.companies = [secondCompany()];
    doc.globalKeys = [];
    const summary = await seedFixture(t.services, doc, { actor: 'test' });
    expect(summary).toMatchObject({ companies: 1, aggregates: 3, unchanged: 0 });
    expect(await countEvents(t.db.pool)).toBe(before + summary.appended);
    expect(await getContactLists(t.db.pool, 202)).toEqual([{ id: 21, companyId: 202, name: 'Clientes', isDefault: true }]);
  });

  it('hands the fixture contacts to the contacts feature: created once, then unchanged', async () => {
    const doc = exampleFixture({ keepContacts: true });
    doc.companies[0].apiKeys[1].active = false; // as revoked above
    const first = await seedFixture(t.services, doc, { actor: 'test' });
    expect(first.contacts).toEqual({ created: 1, changed: 0, unchanged: 0 });
    const second = await seedFixture(t.services, doc, { actor: 'test' });
    expect(second).toMatchObject({ appended: 0, contacts: { created: 0, changed: 0, unchanged: 1 } });
  });

  describe('rejects an invalid document as a whole, naming the JSON path, appending nothing', () => {
    const mutate = (fn: (doc: any) => void) => {
      const doc = twoCompanyFixture();
      fn(doc);
      return doc;
    };

    it.each<[string, unknown, string]>([
      ['not an object', [1, 2], '(document): Invalid input: expected object, received array'],
      ['missing companies', { globalKeys: [] }, 'companies: Invalid input: expected array, received undefined'],
      ['wrong type: company id as string', mutate((d) => { d.companies[0].id = '101'; }), 'companies[0].id: Invalid input: expected number, received string'],
      ['wrong type: isPrimary', mutate((d) => { d.companies[1].phoneNumbers[0].isPrimary = 'yes'; }), 'companies[1].phoneNumbers[0].isPrimary: Invalid input: expected boolean, received string'],
      ['wrong enum: template status', mutate((d) => { d.companies[0].phoneNumbers[0].templates[1].status = 'LIVE'; }),
        'companies[0].phoneNumbers[0].templates[1].status: Invalid option: expected one of "APPROVED"|"PENDING"|"REJECTED"|"PAUSED"|"DISABLED"'],
      ['wrong enum: tier', mutate((d) => { d.companies[0].phoneNumbers[0].messagingLimitTier = 'TIER_5'; }),
        'companies[0].phoneNumbers[0].messagingLimitTier: Invalid option: expected one of "TIER_50"|"TIER_250"|"TIER_1000"|"TIER_10000"|"TIER_100000"|"TIER_UNLIMITED"'],
      ['unknown field on a template', mutate((d) => { d.companies[0].phoneNumbers[0].templates[1].colour = 'red'; }), 'companies[0].phoneNumbers[0].templates[1].colour: unknown field'],
      ['unknown top-level field', mutate((d) => { d.extra = true; }), 'extra: unknown field'],
      ['bad time of day', mutate((d) => { d.companies[0].branches[0].schedules[0].startTime = '9:00'; }), 'companies[0].branches[0].schedules[0].startTime: must be a time of day HH:MM:SS'],
      ['bad date', mutate((d) => { d.companies[0].holidays[0].date = '2026-02-30'; }), 'companies[0].holidays[0].date: must be a date YYYY-MM-DD'],
      ['bad time zone', mutate((d) => { d.companies[0].timezone = 'Mars/Olympus'; }), 'companies[0].timezone: must be an IANA time zone name (e.g. America/Argentina/Buenos_Aires)'],
      ['dangling: holiday on an unknown branch', mutate((d) => { d.companies[0].holidays[1].branches = [1, 9]; }), 'companies[0].holidays[1].branches[1]: unknown branch 9 (not in companies[0].branches)'],
      ['dangling: key of an unknown user', mutate((d) => { d.companies[1].apiKeys[0].userId = 7; }), 'companies[1].apiKeys[0].userId: unknown user 7 (not in companies[1].users)'],
      ['dangling: contact on an unknown list', mutate((d) => {
        d.companies[0].contacts = [{ contactListId: 99, fullName: 'X', phone: '+5491100000000', email: null, source: 'manual', sourceDetail: null, profilePicture: null, isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [] }];
      }), 'companies[0].contacts[0].contactListId: unknown contact list 99 (not in companies[0].contactLists)'],
      ['dangling: contact value of an unknown field', mutate((d) => {
        d.companies[0].contacts = [{ contactListId: 12, fullName: 'X', phone: '+5491100000000', email: null, source: 'manual', sourceDetail: null, profilePicture: null, isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [{ key: 'plan', value: ['gold'], expiresAt: null }] }];
      }), 'companies[0].contacts[0].customFields[0].key: unknown custom field "plan" of list 12'],
      ['contact with a phone that is no number', mutate((d) => {
        d.companies[1].contacts = [{ contactListId: 21, phone: 'call me', createdAt: '2026-01-10T12:00:00Z' }];
      }), 'companies[1].contacts[0].phone: is not a valid phone number (7 characters, 0 digits)'],
      ['duplicate template id', mutate((d) => { d.companies[0].phoneNumbers[0].templates[1].id = 901; }), 'companies[0].phoneNumbers[0].templates[1].id: duplicate template id 901 (first at companies[0].phoneNumbers[0].templates[0].id)'],
      ['duplicate company id', mutate((d) => { d.companies[1].id = 101; }), 'companies[1].id: duplicate company id 101 (first at companies[0].id)'],
      ['duplicate branch id', mutate((d) => { d.companies[0].branches[1].id = 1; }), 'companies[0].branches[1].id: duplicate branch id 1 (first at companies[0].branches[0].id)'],
      ['duplicate custom field id across companies', mutate((d) => { d.companies[1].contactLists[0].customFields = [{ id: 501, key: 'k', name: 'K', fieldType: 'int', options: null, required: false, group: null }]; }),
        'companies[1].contactLists[0].customFields[0].id: duplicate custom field id 501 (first at companies[0].contactLists[0].customFields[0].id)'],
      ['duplicate API key', mutate((d) => { d.companies[1].apiKeys[0].key = EXAMPLE.key; }), 'companies[1].apiKeys[0].key: duplicate API key (the same key as at companies[0].apiKeys[0].key)'],
      ['two default lists', mutate((d) => { d.companies[0].contactLists[1].isDefault = true; }), 'companies[0].contactLists[1].isDefault: a company has at most one default list (companies[0].contactLists[0] is already default)'],
      ['company key with the wrong prefix', mutate((d) => { d.companies[0].apiKeys[0].key = 'xyz_cn7f3a9d2e4b6c8a0f1e3d5c7b9a2468'; }),
        'companies[0].apiKeys[0].key: must be a company key sbk_<secret> (secret of at least 9 characters, no spaces)'],
      ['global key among company keys', mutate((d) => { d.companies[0].apiKeys[0].key = 'sbk_global_0123456789abcdef'; }),
        'companies[0].apiKeys[0].key: must be a company key sbk_<secret> (secret of at least 9 characters, no spaces)'],
      ['company key as a global key', mutate((d) => { d.globalKeys[0].key = 'sbk_0123456789abcdef0123'; }),
        'globalKeys[0].key: must be a global key sbk_global_<secret> (secret of at least 9 characters, no spaces)'],
      ['selector without options', mutate((d) => { d.companies[0].contactLists[0].customFields[0].options = null; }),
        'companies[0].contactLists[0].customFields[0].options: a selector needs a non-empty list of options'],
      ['URL button without url', mutate((d) => { delete d.companies[0].phoneNumbers[0].templates[0].buttons[0].url; }),
        'companies[0].phoneNumbers[0].templates[0].buttons[0].url: a URL button needs url'],
      ['custom hours without times', mutate((d) => { d.companies[0].holidays[1].finishAt = null; }),
        'companies[0].holidays[1].finishAt: hasCustomHours needs startTime and finishAt'],
    ])('%s', async (_name, doc, expected) => {
      const issues = await rejected(t, doc);
      expect(issues).toContain(expected);
    });

    it('reports every problem of the document at once', async () => {
      const doc = mutate((d) => {
        d.companies[0].phoneNumbers[0].templates[1].status = 'LIVE';
        d.companies[1].branches[0].schedules[0].color = 'blue';
        d.companies[0].companySize = 12;
      });
      expect(await rejected(t, doc)).toEqual([
        'companies[0].companySize: Invalid option: expected one of "MICRO"|"SMALL"|"MEDIUM"|"LARGE"|"ENTERPRISE"',
        'companies[0].phoneNumbers[0].templates[1].status: Invalid option: expected one of "APPROVED"|"PENDING"|"REJECTED"|"PAUSED"|"DISABLED"',
        'companies[1].branches[0].schedules[0].color: unknown field',
      ]);
    });

    const otherCompany = () => {
      const other = secondCompany();
      other.id = 303;
      other.apiKeys = [];
      other.users = [];
      other.contactLists[0].id = 31;
      other.phoneNumbers[0].id = 43;
      other.phoneNumbers[0].phoneNumberId = '109876543210009';
      other.phoneNumbers[0].templates[0].id = 953;
      return other;
    };

    it('rejects ids already provisioned for another owner', async () => {
      const other = otherCompany();
      other.contactLists[0].id = 11; // list 11 belongs to company 101
      other.phoneNumbers[0].templates[0].id = 902; // template of number 21
      other.phoneNumbers[0].phoneNumberId = '109876543210001'; // provider id of number 21
      expect(await rejected(t, { companies: [other] })).toEqual([
        'companies[0].contactLists[0].id: contact list 11 already belongs to company 101',
        'companies[0].phoneNumbers[0].templates[0].id: template 902 already belongs to phone number 21',
        'companies[0].phoneNumbers[0].phoneNumberId: phoneNumberId "109876543210001" already belongs to phone number 21',
      ]);
    });

    it('rejects a phone number of another company', async () => {
      const other = otherCompany();
      other.phoneNumbers[0].id = 21; // number 21 belongs to company 101
      other.phoneNumbers[0].phoneNumberId = '109876543210001';
      expect(await rejected(t, { companies: [other] })).toEqual([
        'companies[0].phoneNumbers[0]: phone number 21 belongs to company 101, not 303',
      ]);
    });

    it('rejects a document breaking a rule of the current state (a revoked key made active) with nothing appended', async () => {
      const doc = twoCompanyFixture();
      doc.companies[0].apiKeys[1].active = true; // revoked earlier in this file
      doc.companies[0].phoneNumbers[0].messagingLimitTier = 'TIER_50'; // a valid change in the same document
      expect(await rejected(t, doc)).toEqual([
        'companies[0].apiKeys[1]: this key was revoked and revocation is permanent: set active to false or issue a new key',
      ]);
    });

    it('rejects renaming an issued key', async () => {
      const doc = twoCompanyFixture();
      doc.companies[0].apiKeys[1].active = false;
      doc.companies[0].apiKeys[0].name = 'CRM sync v2';
      expect(await rejected(t, doc)).toEqual([
        'companies[0].apiKeys[0]: the name and user of an issued key cannot change (issued as "CRM sync", user 7); issue a new key instead',
      ]);
    });
  });
});
