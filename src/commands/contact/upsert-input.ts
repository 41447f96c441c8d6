import { CONTACT_SOURCES, type ContactSource } from '../../events/contacts';
import { normalizePhone } from '../../shared/phone';
import { DomainError } from '../decider';
import { canonicalInstant, isStorableDateTime, isValidDateTime, isValidEmail, isValidHttpUrl, longerThan, UNSTORABLE_DATETIME } from './model';

// The upsert request body (spec: POST /api/v1/external/contacts/upsert/), parsed into a command input.
// Top-level keys in snake_case or camelCase; keys inside custom_fields items only snake_case. Every problem is
// reported at once, each naming its field; any problem means nothing is saved.

export interface ProfilePatch {
  fullName?: string | null;
  email?: string | null;
  source?: ContactSource | null;
  sourceDetail?: string | null;
  profilePicture?: string | null;
}

export interface CustomFieldInput {
  /** position in the request's custom_fields array (for messages) */
  index: number;
  customFieldId?: number;
  key?: string;
  /** the raw `value` array; `[]` means no value */
  value: unknown[];
  /** undefined: omitted (keep the active value's expiry); null: no expiry; else canonical ISO instant */
  expiresAt?: string | null;
}

export interface UpsertInput {
  /** canonical E.164 */
  phone: string;
  contactListId?: number;
  profile: ProfilePatch;
  customFields: CustomFieldInput[];
}

type Canonical = 'phone' | 'contactListId' | 'fullName' | 'email' | 'source' | 'sourceDetail' | 'profilePicture' | 'customFields';

const ACCEPTED: Record<string, Canonical> = {
  phone: 'phone',
  contact_list_id: 'contactListId', contactListId: 'contactListId',
  full_name: 'fullName', fullName: 'fullName',
  email: 'email',
  source: 'source',
  source_detail: 'sourceDetail', sourceDetail: 'sourceDetail',
  profile_picture: 'profilePicture', profilePicture: 'profilePicture',
  custom_fields: 'customFields', customFields: 'customFields',
};

const SNAKE: Record<Canonical, string> = {
  phone: 'phone', contactListId: 'contact_list_id', fullName: 'full_name', email: 'email', source: 'source',
  sourceDetail: 'source_detail', profilePicture: 'profile_picture', customFields: 'custom_fields',
};

const PROTECTED_EXACT = new Set([
  'id', 'pk', 'contact_id', 'contactid', 'company', 'company_id', 'companyid', 'contact_list', 'contactlist',
  'list', 'list_id', 'listid', 'created', 'updated', 'modified', 'deleted', 'blocked', 'active', 'test',
  'opt_in', 'optin', 'opt_out', 'optout', 'source_id', 'external_id', 'externalid', 'tags', 'status',
]);

/**
 * Protected fields: ids, messaging-application / photo-application identifiers, dates and internal flags.
 * They are rejected with their own message (an unknown field is rejected too, with another).
 */
export function isProtectedField(key: string): boolean {
  const k = key.toLowerCase();
  if (PROTECTED_EXACT.has(k)) return true;
  if (/msgapp|photoapp|socialmsg|whatsapp|instagram|messenger|facebook|telegram|wa_id|waid|psid|igsid/.test(k)) return true;
  if (/(_at|At|_date|Date|_on|_time|Time|timestamp|Timestamp)$/.test(key) || k === 'date' || k === 'birthday') return true;
  if (/^(is|has|can|was)(_|[A-Z])/.test(key)) return true;
  return false;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown): string => (typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v) ?? String(v));

export const MAX_FULL_NAME = 255;
export const MAX_SOURCE_DETAIL = 1000;
const MAX_LIST_ID = 2_147_483_647;

export function parseUpsertBody(body: unknown): UpsertInput {
  const problems: string[] = [];
  if (!isPlainObject(body)) throw new DomainError('invalid_body', 'request body must be a JSON object');

  const given = new Map<Canonical, { name: string; value: unknown }>();
  for (const [name, value] of Object.entries(body)) {
    const canonical = Object.hasOwn(ACCEPTED, name) ? ACCEPTED[name] : undefined;
    if (!canonical) {
      problems.push(
        isProtectedField(name)
          ? `field "${name}" is protected and cannot be set through the API`
          : `unknown field "${name}"`,
      );
      continue;
    }
    const before = given.get(canonical);
    if (before) {
      problems.push(`field "${SNAKE[canonical]}" is given twice (as "${before.name}" and "${name}")`);
      continue;
    }
    given.set(canonical, { name, value });
  }

  // phone
  let phone: string | null = null;
  const rawPhone = given.get('phone');
  if (!rawPhone || rawPhone.value === null || rawPhone.value === undefined || (typeof rawPhone.value === 'string' && rawPhone.value.trim() === '')) {
    problems.push('phone is required');
  } else if (typeof rawPhone.value !== 'string') {
    problems.push('phone must be a string');
  } else {
    phone = normalizePhone(rawPhone.value);
    if (!phone) {
      problems.push(`phone ${show(rawPhone.value)} is not a valid phone number: use E.164 with the country code (e.g. +5491155551234)`);
    }
  }

  // contact_list_id
  let contactListId: number | undefined;
  const list = given.get('contactListId');
  if (list && list.value !== null && list.value !== undefined) {
    if (typeof list.value !== 'number' || !Number.isSafeInteger(list.value) || list.value < 1) {
      problems.push(`${list.name} must be a positive integer`);
    } else if (list.value > MAX_LIST_ID) {
      // list ids are Postgres integers: a larger one names no list (and would fail the query, a 500)
      problems.push(`${list.name} must be an integer from 1 to ${MAX_LIST_ID}`);
    } else {
      contactListId = list.value;
    }
  }

  const profile: ProfilePatch = {};
  const nullableString = (c: Canonical, max: number, check?: (s: string) => string | null, emptyIsNull = true) => {
    const g = given.get(c);
    if (!g) return;
    if (g.value === null) {
      (profile as Record<string, unknown>)[c] = null;
      return;
    }
    if (typeof g.value !== 'string') {
      problems.push(`${g.name} must be a string or null`);
      return;
    }
    if (longerThan(g.value, max)) {
      problems.push(`${g.name} is longer than ${max} characters`);
      return;
    }
    if (g.value === '' && emptyIsNull) {
      (profile as Record<string, unknown>)[c] = null;
      return;
    }
    const why = check?.(g.value);
    if (why) {
      problems.push(`${g.name} ${why}`);
      return;
    }
    (profile as Record<string, unknown>)[c] = g.value;
  };
  nullableString('fullName', MAX_FULL_NAME, undefined, false);
  nullableString('email', 254, (s) => (isValidEmail(s) ? null : `${show(s)} is not a valid email address`));
  nullableString('sourceDetail', MAX_SOURCE_DETAIL);
  nullableString('profilePicture', 2048, (s) => (isValidHttpUrl(s) ? null : `${show(s)} is not a valid http(s) URL`));

  const source = given.get('source');
  if (source) {
    if (typeof source.value !== 'string' || !(CONTACT_SOURCES as readonly string[]).includes(source.value)) {
      problems.push(`source must be one of ${CONTACT_SOURCES.join(', ')}`);
    } else {
      profile.source = source.value as ContactSource;
    }
  }

  const customFields: CustomFieldInput[] = [];
  const cf = given.get('customFields');
  if (cf && cf.value !== null && cf.value !== undefined) {
    if (!Array.isArray(cf.value)) {
      problems.push(`${cf.name} must be an array`);
    } else {
      cf.value.forEach((item, index) => {
        const parsed = parseCustomFieldItem(item, index, problems);
        if (parsed) customFields.push(parsed);
      });
    }
  }

  if (problems.length > 0 || !phone) throw new DomainError('invalid_request', problems.join('; '));
  return { phone, contactListId, profile, customFields };
}

const ITEM_KEYS = new Set(['custom_field_id', 'key', 'value', 'expires_at']);

function parseCustomFieldItem(item: unknown, index: number, problems: string[]): CustomFieldInput | undefined {
  const at = `custom_fields[${index}]`;
  if (!isPlainObject(item)) {
    problems.push(`${at} must be an object with custom_field_id or key, and value`);
    return undefined;
  }
  const before = problems.length;
  for (const k of Object.keys(item)) {
    if (ITEM_KEYS.has(k)) continue;
    if (k === 'customFieldId') problems.push(`${at}.customFieldId is not accepted: keys inside custom_fields are snake_case (custom_field_id)`);
    else if (k === 'expiresAt') problems.push(`${at}.expiresAt is not accepted: keys inside custom_fields are snake_case (expires_at)`);
    else problems.push(`${at}: unknown field "${k}" (an item has custom_field_id or key, value and optionally expires_at)`);
  }
  const hasId = item.custom_field_id !== undefined;
  const hasKey = item.key !== undefined;
  let customFieldId: number | undefined;
  let key: string | undefined;
  if (hasId && hasKey) problems.push(`${at} must identify the field by custom_field_id or by key, not both`);
  else if (!hasId && !hasKey) problems.push(`${at} must identify the field by custom_field_id or by key`);
  else if (hasId) {
    const v = item.custom_field_id;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) problems.push(`${at}.custom_field_id must be a positive integer`);
    else customFieldId = v;
  } else {
    const v = item.key;
    if (typeof v !== 'string' || v.trim() === '') problems.push(`${at}.key must be a non-empty string`);
    else key = v;
  }
  if (!('value' in item)) problems.push(`${at}.value is required (an array; [] means no value)`);
  else if (!Array.isArray(item.value)) problems.push(`${at}.value must be an array (one element; several only for multiselector; [] for no value)`);
  else if (item.value.some((v) => v === null || (typeof v !== 'string' && typeof v !== 'number'))) {
    problems.push(`${at}.value elements must be strings or numbers`);
  }
  let expiresAt: string | null | undefined;
  if ('expires_at' in item) {
    const e = item.expires_at;
    if (e === null) expiresAt = null;
    else if (typeof e !== 'string' || !isValidDateTime(e)) {
      problems.push(`${at}.expires_at must be an ISO 8601 date-time with a zone (e.g. 2026-12-31T23:59:59Z) or null`);
    } else if (!isStorableDateTime(e)) {
      problems.push(`${at}.expires_at ${UNSTORABLE_DATETIME}`);
    } else expiresAt = canonicalInstant(e);
  }
  if (problems.length > before) return undefined;
  return { index, customFieldId, key, value: item.value as unknown[], expiresAt };
}
