import { DomainError } from '../../src/commands/decider';
import { canonicalValue, type FieldDef, type FieldType } from '../../src/commands/contact/model';
import { isProtectedField, parseUpsertBody } from '../../src/commands/contact/upsert-input';

const problem = (body: unknown): string => {
  try {
    parseUpsertBody(body);
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return (err as Error).message;
  }
  throw new Error('expected a DomainError');
};

describe('parseUpsertBody', () => {
  it('accepts snake_case and camelCase top-level keys', () => {
    expect(parseUpsertBody({
      phone: '011 15 5555-1234', contactListId: 11, full_name: 'Ana', sourceDetail: 'form', profile_picture: 'https://x.example/a.png',
      email: '', customFields: [{ key: 'plan', value: ['gold'], expires_at: '2026-12-31T20:59:59-03:00' }],
    })).toEqual({
      phone: '+5491155551234',
      contactListId: 11,
      profile: { fullName: 'Ana', sourceDetail: 'form', profilePicture: 'https://x.example/a.png', email: null },
      customFields: [{ index: 0, key: 'plan', customFieldId: undefined, value: ['gold'], expiresAt: '2026-12-31T23:59:59.000Z' }],
    });
  });

  it('keeps null (clear) apart from absent (keep)', () => {
    expect(parseUpsertBody({ phone: '+5491155551234', full_name: null }).profile).toEqual({ fullName: null });
    expect(parseUpsertBody({ phone: '+5491155551234' }).profile).toEqual({});
  });

  it.each([
    ['no phone', {}, 'phone is required'],
    ['a blank phone', { phone: ' ' }, 'phone is required'],
    ['a phone that is not a string', { phone: 5491155551234 }, 'phone must be a string'],
    ['an invalid phone', { phone: '12' }, 'phone "12" is not a valid phone number: use E.164 with the country code (e.g. +5491155551234)'],
    ['an unknown field', { phone: '+5491155551234', nickname: 'x' }, 'unknown field "nickname"'],
    ['id', { phone: '+5491155551234', id: 3 }, 'field "id" is protected and cannot be set through the API'],
    ['a date', { phone: '+5491155551234', created_at: '2026-01-01' }, 'field "created_at" is protected and cannot be set through the API'],
    ['a camelCase date', { phone: '+5491155551234', updatedAt: '2026-01-01' }, 'field "updatedAt" is protected and cannot be set through the API'],
    ['a messaging-app id', { phone: '+5491155551234', msgapp_id: 'x' }, 'field "msgapp_id" is protected and cannot be set through the API'],
    ['a photo-app id', { phone: '+5491155551234', photoappUsername: 'x' }, 'field "photoappUsername" is protected and cannot be set through the API'],
    ['an internal flag', { phone: '+5491155551234', is_test: true }, 'field "is_test" is protected and cannot be set through the API'],
    ['a field in both casings', { phone: '+5491155551234', full_name: 'a', fullName: 'b' }, 'field "full_name" is given twice (as "full_name" and "fullName")'],
    ['a bad email', { phone: '+5491155551234', email: 'nope' }, 'email "nope" is not a valid email address'],
    ['a bad picture URL', { phone: '+5491155551234', profilePicture: 'ftp://x' }, 'profilePicture "ftp://x" is not a valid http(s) URL'],
    ['a bad source', { phone: '+5491155551234', source: 'web' }, 'source must be one of manual, csv_import, organic, msgapp_sync, photoapp_sync, directory_contacts, group, api, other'],
    ['a non-integer list', { phone: '+5491155551234', contact_list_id: '11' }, 'contact_list_id must be a positive integer'],
    ['custom_fields not an array', { phone: '+5491155551234', custom_fields: {} }, 'custom_fields must be an array'],
    ['an item without identifier', { phone: '+5491155551234', custom_fields: [{ value: ['x'] }] }, 'custom_fields[0] must identify the field by custom_field_id or by key'],
    ['an item with both identifiers', { phone: '+5491155551234', custom_fields: [{ custom_field_id: 1, key: 'a', value: ['x'] }] }, 'custom_fields[0] must identify the field by custom_field_id or by key, not both'],
    ['customFieldId', { phone: '+5491155551234', custom_fields: [{ customFieldId: 501, value: ['x'] }] },
      'custom_fields[0].customFieldId is not accepted: keys inside custom_fields are snake_case (custom_field_id); custom_fields[0] must identify the field by custom_field_id or by key'],
    ['a value that is not an array', { phone: '+5491155551234', custom_fields: [{ key: 'a', value: 'x' }] }, 'custom_fields[0].value must be an array (one element; several only for multiselector; [] for no value)'],
    ['a missing value', { phone: '+5491155551234', custom_fields: [{ key: 'a' }] }, 'custom_fields[0].value is required (an array; [] means no value)'],
    ['a malformed expires_at', { phone: '+5491155551234', custom_fields: [{ key: 'a', value: ['x'], expires_at: 'tomorrow' }] },
      'custom_fields[0].expires_at must be an ISO 8601 date-time with a zone (e.g. 2026-12-31T23:59:59Z) or null'],
    ['an expires_at without zone', { phone: '+5491155551234', custom_fields: [{ key: 'a', value: ['x'], expires_at: '2026-12-31T23:59:59' }] },
      'custom_fields[0].expires_at must be an ISO 8601 date-time with a zone (e.g. 2026-12-31T23:59:59Z) or null'],
    ['an impossible date in expires_at', { phone: '+5491155551234', custom_fields: [{ key: 'a', value: ['x'], expires_at: '2026-02-30T00:00:00Z' }] },
      'custom_fields[0].expires_at must be an ISO 8601 date-time with a zone (e.g. 2026-12-31T23:59:59Z) or null'],
  ])('rejects %s', (_d, body, message) => {
    expect(problem(body)).toBe(message);
  });

  it('reports every problem at once', () => {
    expect(problem({ id: 1, phone: 'x', email: 'y' })).toBe(
      'field "id" is protected and cannot be set through the API; phone "x" is not a valid phone number: use E.164 with the country code (e.g. +5491155551234); email "y" is not a valid email address',
    );
  });

  it('rejects a body that is not an object', () => {
    expect(problem([])).toBe('request body must be a JSON object');
    expect(problem(null)).toBe('request body must be a JSON object');
  });

  it.each(['id', 'created_at', 'createdAt', 'msgapp_phone', 'photoapp_id', 'whatsapp_id', 'is_blocked', 'isTest', 'company_id', 'last_message_date'])(
    '%s is protected', (k) => expect(isProtectedField(k)).toBe(true),
  );
  it.each(['nickname', 'tags_text', 'phone_number', 'address'])('%s is merely unknown', (k) => expect(isProtectedField(k)).toBe(false));
});

describe('canonicalValue per field type', () => {
  const def = (fieldType: FieldType, options: string[] | null = null): FieldDef => ({
    id: 1, listId: 1, key: 'f', name: 'F', fieldType, options, required: false, group: null,
  });
  it.each<[FieldType, unknown[], unknown[]]>([
    ['string', ['hello'], ['hello']],
    ['text', ['long text'], ['long text']],
    ['textarea', ['a\nb'], ['a\nb']],
    ['int', [42], [42]],
    ['int', ['-7'], [-7]],
    ['float', [1.5], [1.5]],
    ['float', ['2.25'], [2.25]],
    ['email', ['a@b.co'], ['a@b.co']],
    ['url', ['https://example.com/x?y=1'], ['https://example.com/x?y=1']],
    ['date', ['2024-02-29'], ['2024-02-29']],
    ['datetime', ['2026-01-10T12:00:00Z'], ['2026-01-10T12:00:00Z']],
    ['datetime', ['2026-01-10T09:00:00.123-03:00'], ['2026-01-10T09:00:00.123-03:00']],
    ['time', ['09:30'], ['09:30']],
    ['time', ['23:59:59'], ['23:59:59']],
  ])('%s accepts %j', (type, raw, expected) => {
    expect(canonicalValue(def(type), raw)).toEqual({ ok: true, value: expected });
  });

  it('selector and multiselector', () => {
    expect(canonicalValue(def('selector', ['a', 'b']), ['b'])).toEqual({ ok: true, value: ['b'] });
    expect(canonicalValue(def('multiselector', ['a', 'b', 'c']), ['c', 'a'])).toEqual({ ok: true, value: ['a', 'c'] });
  });

  it.each<[FieldType, unknown[], string]>([
    ['string', [1], 'value must be a string'],
    ['string', ['x'.repeat(256)], 'value is longer than 255 characters'],
    ['string', ['a', 'b'], 'a string field takes exactly one value (got 2); only multiselector fields take several'],
    ['int', ['1.5'], 'value must be an integer'],
    ['int', [1.5], 'value must be an integer'],
    ['int', ['abc'], 'value must be an integer'],
    ['float', ['abc'], 'value must be a number'],
    ['email', ['nope'], 'value must be a valid email address'],
    ['url', ['example.com'], 'value must be a valid http(s) URL'],
    ['url', ['javascript:alert(1)'], 'value must be a valid http(s) URL'],
    ['date', ['2026-02-30'], 'value must be a date YYYY-MM-DD'],
    ['date', ['10/01/2026'], 'value must be a date YYYY-MM-DD'],
    ['datetime', ['2026-01-10 12:00'], 'value must be an ISO 8601 date-time with a zone (e.g. 2026-01-10T12:00:00Z)'],
    ['datetime', ['2026-01-10T12:00:00'], 'value must be an ISO 8601 date-time with a zone (e.g. 2026-01-10T12:00:00Z)'],
    ['time', ['24:00'], 'value must be a time HH:MM or HH:MM:SS'],
    ['time', ['9:30'], 'value must be a time HH:MM or HH:MM:SS'],
  ])('%s rejects %j', (type, raw, error) => {
    expect(canonicalValue(def(type), raw)).toEqual({ ok: false, error });
  });

  it('selector values must be options; multiselector values distinct options', () => {
    expect(canonicalValue(def('selector', ['a']), ['z'])).toEqual({ ok: false, error: 'value must be one of ["a"]' });
    expect(canonicalValue(def('multiselector', ['a', 'b']), ['a', 'z'])).toEqual({ ok: false, error: '"z" is not an option; options are ["a","b"]' });
    expect(canonicalValue(def('multiselector', ['a', 'b']), ['a', 'a'])).toEqual({ ok: false, error: 'values must be distinct' });
  });
});
