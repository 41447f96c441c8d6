import { defineEvent, type EventOf, isoDateTime, nullableString, positiveInt } from './define';
import type { FIELD_TYPES } from './provisioning';

// Streams (ARCHITECTURE section 5):
//  - contact-{companyId}-{contactId}: ContactCreated, ContactProfileChanged, CustomFieldValueSet, CustomFieldValueCleared
//  - contactphone-{companyId}-{e164}: ContactPhoneClaimed (serialises creates for one number; see docs/contacts.md)
// Every custom-field version is one event (CustomFieldValueSet or CustomFieldValueCleared) carrying its version;
// the time and actor of a version are the event's metadata (`at`, `actor`).

export const CONTACT_SOURCES = [
  'manual', 'csv_import', 'organic', 'msgapp_sync', 'photoapp_sync', 'directory_contacts', 'group', 'api', 'other',
] as const;
export type ContactSource = (typeof CONTACT_SOURCES)[number];

// The shapes the contact events, the contact aggregate and the contacts read model share.

/** A contact's profile, as ContactCreated and ContactProfileChanged carry it. */
export interface ContactProfile {
  fullName: string | null;
  email: string | null;
  source: ContactSource | null;
  sourceDetail: string | null;
  profilePicture: string | null;
  isTest: boolean;
}

export type FieldType = (typeof FIELD_TYPES)[number];
export type FieldScalar = string | number;

/** A custom field configured on a contact list (CustomFieldDefined / CustomFieldChanged, as the read model keeps it). */
export interface FieldDef {
  id: number;
  listId: number;
  key: string;
  name: string;
  fieldType: FieldType;
  options: string[] | null;
  required: boolean;
  /** name of a repeatable group: such fields cannot be set through the API */
  group: string | null;
}

export interface ContactListInfo {
  id: number;
  name: string;
  isDefault: boolean;
  fields: FieldDef[];
}

/** The latest version of one custom field of a contact (value null: cleared). */
export interface FieldVersion {
  version: number;
  value: FieldScalar[] | null;
  expiresAt: string | null;
}

const e164 = { type: 'string', pattern: '^\\+[1-9]\\d{5,15}$' } as const;

/** A custom-field value: a JSON array (strings; numbers for int and float fields). */
const fieldValue = { type: 'array', minItems: 1, items: { type: ['string', 'number'] } } as const;

const profile = {
  fullName: nullableString,
  email: nullableString,
  source: { enum: [...CONTACT_SOURCES, null] },
  sourceDetail: nullableString,
  profilePicture: nullableString,
  isTest: { type: 'boolean' },
} as const;

export const ContactCreated = defineEvent('ContactCreated', {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'contactId', 'contactListId', 'phone', 'fullName', 'email', 'source', 'sourceDetail', 'profilePicture', 'isTest', 'createdAt'],
  properties: {
    companyId: positiveInt, contactId: positiveInt, contactListId: positiveInt, phone: e164,
    ...profile,
    createdAt: isoDateTime,
  },
} as const, { description: 'A contact was created. Its initial custom-field values follow as CustomFieldValueSet events in the same append.' });

export const ContactProfileChanged = defineEvent('ContactProfileChanged', {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'contactId', 'fullName', 'email', 'source', 'sourceDetail', 'profilePicture', 'isTest'],
  properties: { companyId: positiveInt, contactId: positiveInt, ...profile },
} as const, { description: "The contact's profile changed (full new profile; phone and list never change)." });

export const CustomFieldValueSet = defineEvent('CustomFieldValueSet', {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'contactId', 'fieldId', 'key', 'version', 'value', 'expiresAt'],
  properties: {
    companyId: positiveInt, contactId: positiveInt, fieldId: positiveInt, key: { type: 'string' },
    version: positiveInt,
    value: fieldValue,
    expiresAt: { type: ['string', 'null'], format: 'date-time' },
  },
} as const, { description: 'A new version of a custom-field value (a changed value or expiry). Versions count from 1 per contact and field.' });

export const CustomFieldValueCleared = defineEvent('CustomFieldValueCleared', {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'contactId', 'fieldId', 'key', 'version'],
  properties: { companyId: positiveInt, contactId: positiveInt, fieldId: positiveInt, key: { type: 'string' }, version: positiveInt },
} as const, { description: 'A new version of a custom-field value without a value (`value: []` in an upsert).' });

export const ContactPhoneClaimed = defineEvent('ContactPhoneClaimed', {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'phone', 'contactId', 'isTest'],
  properties: { companyId: positiveInt, phone: e164, contactId: positiveInt, isTest: { type: 'boolean' } },
} as const, {
  description: 'A contact holds this number in its company. Appended before the contact is created; the first claim of a number is appended with expected revision no_stream, so concurrent creates of one number produce one contact.',
});

export const contactEvents = [ContactCreated, ContactProfileChanged, CustomFieldValueSet, CustomFieldValueCleared, ContactPhoneClaimed] as const;
export type ContactStreamEvent = EventOf<(typeof contactEvents)[number]>;
export type ContactEvent = Exclude<ContactStreamEvent, { type: 'ContactPhoneClaimed' }>;
export type ContactPhoneEvent = Extract<ContactStreamEvent, { type: 'ContactPhoneClaimed' }>;
