import {
  contactDecider,
  phoneClaimDecider,
  type UpsertContact,
  versionedFields,
} from '../../src/commands/contact/decider';
import type { ContactListInfo } from '../../src/commands/contact/model';
import type { ContactEvent } from '../../src/events/contacts';
import { spec } from '../support/decider';

const NOW = '2026-03-01T12:00:00.000Z';
const LATER = '2026-06-01T00:00:00.000Z';
const EARLIER = '2026-02-01T00:00:00.000Z';

const list: ContactListInfo = {
  id: 11, name: 'Patients', isDefault: true,
  fields: [
    { id: 501, listId: 11, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold'], required: false, group: null },
    { id: 502, listId: 11, key: 'visits', name: 'Visits', fieldType: 'int', options: null, required: false, group: null },
    { id: 503, listId: 11, key: 'allergies', name: 'Allergies', fieldType: 'multiselector', options: ['latex', 'penicillin', 'pollen'], required: false, group: null },
    { id: 505, listId: 11, key: 'guardian_name', name: 'Guardian', fieldType: 'string', options: null, required: false, group: 'guardians' },
  ],
};

const upsert = (over: Partial<UpsertContact> = {}): UpsertContact => ({
  type: 'UpsertContact', companyId: 101, contactId: 7, phone: '+5491155551234', list, profile: {}, customFields: [], now: NOW, mode: 'api', ...over,
});

const created: ContactEvent = {
  type: 'ContactCreated',
  data: {
    companyId: 101, contactId: 7, contactListId: 11, phone: '+5491155551234', fullName: 'Ana', email: null, source: 'api',
    sourceDetail: null, profilePicture: null, isTest: false, createdAt: NOW,
  },
};
const set = (fieldId: number, key: string, version: number, value: Array<string | number>, expiresAt: string | null = null): ContactEvent => ({
  type: 'CustomFieldValueSet', data: { companyId: 101, contactId: 7, fieldId, key, version, value, expiresAt },
});
const cleared = (fieldId: number, key: string, version: number): ContactEvent => ({
  type: 'CustomFieldValueCleared', data: { companyId: 101, contactId: 7, fieldId, key, version },
});

describe('contact decider: create', () => {
  it('creates with defaults (source api) and a version 1 per value given; [] creates nothing', () => {
    spec(contactDecider).given([]).when(upsert({
      profile: { fullName: 'Ana' },
      customFields: [
        { index: 0, key: 'plan', value: ['gold'] },
        { index: 1, customFieldId: 502, value: ['3'], expiresAt: LATER },
        { index: 2, key: 'allergies', value: [] },
      ],
    })).then([created, set(501, 'plan', 1, ['gold']), set(502, 'visits', 1, [3], LATER)]);
  });

  it('takes the fixture flag and creation time in seed mode', () => {
    spec(contactDecider).given([]).when(upsert({ mode: 'seed', isTest: true, createdAt: EARLIER, profile: { fullName: 'Ana', source: 'manual' } }))
      .then([{ ...created, data: { ...created.data, isTest: true, createdAt: EARLIER, source: 'manual' } } as ContactEvent]);
  });

  it('rejects a requested list that does not exist', () => {
    spec(contactDecider).given([]).when(upsert({ list: null, requestedListId: 99 })).thenThrows('unknown_contact_list');
  });

  it('rejects a create without a list when the company has no default list', () => {
    spec(contactDecider).given([]).when(upsert({ list: null })).thenThrows('no_default_list');
  });
});

describe('contact decider: update', () => {
  it('decides nothing for an unchanged profile and unchanged values', () => {
    spec(contactDecider).given([created, set(501, 'plan', 1, ['gold'])])
      .when(upsert({ profile: { fullName: 'Ana' }, customFields: [{ index: 0, key: 'plan', value: ['gold'] }] }))
      .then([]);
  });

  it('changes the profile as a full new profile, keeping fields not given', () => {
    spec(contactDecider).given([created]).when(upsert({ profile: { email: 'ana@example.com' } })).then([{
      type: 'ContactProfileChanged',
      data: { companyId: 101, contactId: 7, fullName: 'Ana', email: 'ana@example.com', source: 'api', sourceDetail: null, profilePicture: null, isTest: false },
    }]);
  });

  it('rejects a list change; the same list is accepted', () => {
    spec(contactDecider).given([created]).when(upsert({ requestedListId: 12 })).thenThrows('contact_list_change');
    spec(contactDecider).given([created]).when(upsert({ requestedListId: 11 })).then([]);
  });

  it('numbers versions per field, consecutively', () => {
    spec(contactDecider).given([created, set(501, 'plan', 1, ['gold']), set(501, 'plan', 2, ['basic'])])
      .when(upsert({ customFields: [{ index: 0, key: 'plan', value: ['gold'] }, { index: 1, key: 'visits', value: [1] }] }))
      .then([set(501, 'plan', 3, ['gold']), set(502, 'visits', 1, [1])]);
  });

  it('clears with a new version; clearing a field without value decides nothing', () => {
    spec(contactDecider).given([created, set(501, 'plan', 1, ['gold'])])
      .when(upsert({ customFields: [{ index: 0, key: 'plan', value: [] }, { index: 1, key: 'visits', value: [] }] }))
      .then([cleared(501, 'plan', 2)]);
    spec(contactDecider).given([created, set(501, 'plan', 1, ['gold']), cleared(501, 'plan', 2)])
      .when(upsert({ customFields: [{ index: 0, key: 'plan', value: [] }] }))
      .then([]);
  });

  it('an omitted expires_at keeps the active expiry; null removes it; a new one is a new version', () => {
    const given = [created, set(501, 'plan', 1, ['gold'], LATER)];
    spec(contactDecider).given(given).when(upsert({ customFields: [{ index: 0, key: 'plan', value: ['gold'] }] })).then([]);
    spec(contactDecider).given(given).when(upsert({ customFields: [{ index: 0, key: 'plan', value: ['gold'], expiresAt: null }] }))
      .then([set(501, 'plan', 2, ['gold'], null)]);
    spec(contactDecider).given(given).when(upsert({ customFields: [{ index: 0, key: 'plan', value: ['basic'] }] }))
      .then([set(501, 'plan', 2, ['basic'], LATER)]);
    spec(contactDecider).given(given).when(upsert({ customFields: [{ index: 0, key: 'plan', value: ['gold'], expiresAt: '2026-07-01T00:00:00.000Z' }] }))
      .then([set(501, 'plan', 2, ['gold'], '2026-07-01T00:00:00.000Z')]);
  });

  it('an expired value is no value: the same value again is a new version without the old expiry', () => {
    spec(contactDecider).given([created, set(501, 'plan', 1, ['gold'], EARLIER)])
      .when(upsert({ customFields: [{ index: 0, key: 'plan', value: ['gold'] }] }))
      .then([set(501, 'plan', 2, ['gold'], null)]);
  });

  it('rejects an expiry in the past through the API; the seed takes it and is idempotent against the latest version', () => {
    spec(contactDecider).given([created])
      .when(upsert({ customFields: [{ index: 0, key: 'plan', value: ['gold'], expiresAt: EARLIER }] }))
      .thenThrows('invalid_custom_fields');
    spec(contactDecider).given([created])
      .when(upsert({ mode: 'seed', customFields: [{ index: 0, key: 'plan', value: ['gold'], expiresAt: EARLIER }] }))
      .then([set(501, 'plan', 1, ['gold'], EARLIER)]);
    spec(contactDecider).given([created, set(501, 'plan', 1, ['gold'], EARLIER)])
      .when(upsert({ mode: 'seed', profile: { fullName: 'Ana' }, customFields: [{ index: 0, key: 'plan', value: ['gold'], expiresAt: EARLIER }] }))
      .then([]);
  });

  it('multiselector values are a set in the order of the options', () => {
    spec(contactDecider).given([created, set(503, 'allergies', 1, ['latex', 'pollen'])])
      .when(upsert({ customFields: [{ index: 0, key: 'allergies', value: ['pollen', 'latex'] }] }))
      .then([]);
  });

  it('rejects grouped fields through the API but not in the seed', () => {
    spec(contactDecider).given([created]).when(upsert({ customFields: [{ index: 0, key: 'guardian_name', value: ['Eva'] }] }))
      .thenThrows('invalid_custom_fields');
    spec(contactDecider).given([created]).when(upsert({ mode: 'seed', profile: { fullName: 'Ana' }, customFields: [{ index: 0, key: 'guardian_name', value: ['Eva'] }] }))
      .then([set(505, 'guardian_name', 1, ['Eva'])]);
  });

  it.each([
    ['a field twice by key', [{ index: 0, key: 'plan', value: ['gold'] }, { index: 1, key: 'plan', value: ['basic'] }]],
    ['a field by id and by key', [{ index: 0, customFieldId: 501, value: ['gold'] }, { index: 1, key: 'plan', value: ['gold'] }]],
    ['an unknown id', [{ index: 0, customFieldId: 999, value: ['x'] }]],
    ['an unknown key', [{ index: 0, key: 'nope', value: ['x'] }]],
    ['a value not among the options', [{ index: 0, key: 'plan', value: ['platinum'] }]],
    ['two values for a selector', [{ index: 0, key: 'plan', value: ['gold', 'basic'] }]],
    ['a non-integer for an int', [{ index: 0, key: 'visits', value: ['3.5'] }]],
  ])('rejects %s', (_d, customFields) => {
    spec(contactDecider).given([created]).when(upsert({ customFields })).thenThrows('invalid_custom_fields');
  });
});

describe('versionedFields', () => {
  it('lists the fields that got a version', () => {
    expect(versionedFields([created, set(501, 'plan', 2, ['gold']), cleared(502, 'visits', 4)])).toEqual([
      { customFieldId: 501, key: 'plan', version: 2 },
      { customFieldId: 502, key: 'visits', version: 4 },
    ]);
  });
});

describe('phone claim decider', () => {
  const claim = (contactId: number, isTest = false) => ({
    type: 'ContactPhoneClaimed' as const, data: { companyId: 101, phone: '+5491155551234', contactId, isTest },
  });
  const cmd = (contactId: number, mode: 'api' | 'seed' = 'api', isTest = false) => ({
    type: 'ClaimPhone' as const, companyId: 101, phone: '+5491155551234', contactId, isTest, mode,
  });

  it('claims a free number', () => {
    spec(phoneClaimDecider).given([]).when(cmd(7)).then([claim(7)]);
  });
  it('a contact that holds the number already claims nothing', () => {
    spec(phoneClaimDecider).given([claim(7)]).when(cmd(7)).then([]);
  });
  it('through the API a number held by a (non-test) contact cannot be claimed again', () => {
    spec(phoneClaimDecider).given([claim(7)]).when(cmd(8)).thenThrows('phone_taken');
  });
  it('a test contact does not hold the number for the API', () => {
    spec(phoneClaimDecider).given([claim(7, true)]).when(cmd(8)).then([claim(8)]);
  });
  it('fixtures may give one number to several contacts', () => {
    spec(phoneClaimDecider).given([claim(7)]).when(cmd(8, 'seed')).then([claim(8)]);
  });
});
