import { defineEvent, type EventOf, isoDateTime, nullableString, positiveInt } from './define';

// Streams: company-{id}, apikey-{keyId}, phonenumber-{id}. Provisioning arrives through `switchboard seed`.
// *Registered/*Declared/*Defined create an entity; *Changed carries the entity's full new state.

const companyProfile = {
  companyId: positiveInt,
  name: { type: 'string' },
  email: { type: 'string' },
  phone: { type: 'string' },
  website: { type: 'string' },
  address: { type: 'string' },
  description: { type: 'string' },
  timezone: { type: 'string' },
  companySize: { enum: ['MICRO', 'SMALL', 'MEDIUM', 'LARGE', 'ENTERPRISE', null] },
  companyTypes: { type: 'array', items: { enum: ['ECOMMERCE', 'CLINIC'] } },
  categories: { type: 'array', items: { type: 'string' } },
} as const;
const companyProfileRequired = Object.keys(companyProfile) as (keyof typeof companyProfile)[];

export const CompanyRegistered = defineEvent('CompanyRegistered', {
  type: 'object', additionalProperties: false, required: companyProfileRequired, properties: companyProfile,
} as const);
export const CompanyProfileChanged = defineEvent('CompanyProfileChanged', {
  type: 'object', additionalProperties: false, required: companyProfileRequired, properties: companyProfile,
} as const);

const user = {
  companyId: positiveInt, userId: positiveInt, email: { type: 'string' }, firstName: { type: 'string' }, lastName: { type: 'string' },
} as const;
export const UserRegistered = defineEvent('UserRegistered', {
  type: 'object', additionalProperties: false, required: ['companyId', 'userId', 'email', 'firstName', 'lastName'], properties: user,
} as const);
export const UserChanged = defineEvent('UserChanged', {
  type: 'object', additionalProperties: false, required: ['companyId', 'userId', 'email', 'firstName', 'lastName'], properties: user,
} as const);

const branch = {
  companyId: positiveInt, branchId: positiveInt, name: { type: 'string' }, branchType: { enum: ['PHYSICAL', 'ONLINE'] },
  address: { type: 'string' }, phone: { type: 'string' },
} as const;
export const BranchConfigured = defineEvent('BranchConfigured', {
  type: 'object', additionalProperties: false, required: ['companyId', 'branchId', 'name', 'branchType', 'address', 'phone'], properties: branch,
} as const, { description: 'A branch was configured (first time or with changed details: full state).' });

export const BranchScheduleSet = defineEvent('BranchScheduleSet', {
  type: 'object', additionalProperties: false, required: ['companyId', 'branchId', 'schedules'],
  properties: {
    companyId: positiveInt, branchId: positiveInt,
    schedules: {
      type: 'array',
      items: {
        type: 'object', additionalProperties: false,
        required: ['id', 'days', 'startTime', 'finishAt', 'isActive', 'description', 'specificDate'],
        properties: {
          id: positiveInt,
          days: { type: 'array', items: { enum: ['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY', 'SUNDAY'] } },
          startTime: { type: 'string' }, finishAt: { type: 'string' }, isActive: { type: 'boolean' },
          description: { type: 'string' }, specificDate: nullableString,
        },
      },
    },
  },
} as const, { description: "The branch's full set of schedules (replaces the previous set)." });

const holiday = {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'holidayId', 'name', 'description', 'date', 'branches', 'attentionTarget', 'hasCustomHours', 'startTime', 'finishAt', 'isActive'],
  properties: {
    companyId: positiveInt, holidayId: positiveInt, name: { type: 'string' }, description: { type: 'string' },
    date: { type: 'string', format: 'date' }, branches: { type: 'array', items: positiveInt },
    attentionTarget: { enum: ['VIRTUAL_ATTENTION', 'BRANCH', 'ALL_BRANCHES', 'ALL'] }, hasCustomHours: { type: 'boolean' },
    startTime: nullableString, finishAt: nullableString, isActive: { type: 'boolean' },
  },
} as const;
export const HolidayDeclared = defineEvent('HolidayDeclared', holiday);
export const HolidayChanged = defineEvent('HolidayChanged', holiday);

const agent = { type: 'object', additionalProperties: false, required: ['companyId', 'agentId', 'name', 'version'],
  properties: { companyId: positiveInt, agentId: positiveInt, name: { type: 'string' }, version: { type: 'string' } } } as const;
export const AgentRegistered = defineEvent('AgentRegistered', agent);
export const AgentChanged = defineEvent('AgentChanged', agent);

const operator = { type: 'object', additionalProperties: false, required: ['companyId', 'operatorId', 'name'],
  properties: { companyId: positiveInt, operatorId: positiveInt, name: { type: 'string' } } } as const;
export const OperatorRegistered = defineEvent('OperatorRegistered', operator);
export const OperatorChanged = defineEvent('OperatorChanged', operator);

const contactList = { type: 'object', additionalProperties: false, required: ['companyId', 'listId', 'name', 'isDefault'],
  properties: { companyId: positiveInt, listId: positiveInt, name: { type: 'string' }, isDefault: { type: 'boolean' } } } as const;
export const ContactListCreated = defineEvent('ContactListCreated', contactList);
export const ContactListChanged = defineEvent('ContactListChanged', contactList);

export const FIELD_TYPES = ['string', 'text', 'textarea', 'int', 'float', 'email', 'url', 'date', 'datetime', 'time', 'selector', 'multiselector'] as const;
const customField = {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'listId', 'fieldId', 'key', 'name', 'fieldType', 'options', 'required', 'group'],
  properties: {
    companyId: positiveInt, listId: positiveInt, fieldId: positiveInt, key: { type: 'string' }, name: { type: 'string' },
    fieldType: { enum: FIELD_TYPES }, options: { type: ['array', 'null'], items: { type: 'string' } },
    required: { type: 'boolean' }, group: nullableString,
  },
} as const;
export const CustomFieldDefined = defineEvent('CustomFieldDefined', customField);
export const CustomFieldChanged = defineEvent('CustomFieldChanged', customField);

// apikey-{keyId}
export const ApiKeyIssued = defineEvent('ApiKeyIssued', {
  type: 'object', additionalProperties: false,
  required: ['keyId', 'scope', 'companyId', 'userId', 'name', 'keyHash', 'expiresAt'],
  properties: {
    keyId: { type: 'string' }, scope: { enum: ['company', 'global'] }, companyId: { type: ['integer', 'null'] },
    userId: { type: ['integer', 'null'] }, name: { type: 'string' },
    keyHash: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'HMAC-SHA256(API_KEY_PEPPER, key), hex; never the key' },
    expiresAt: { type: ['string', 'null'], format: 'date-time' },
  },
} as const);
export const ApiKeyRevoked = defineEvent('ApiKeyRevoked', {
  type: 'object', additionalProperties: false, required: ['keyId'], properties: { keyId: { type: 'string' }, reason: { type: 'string' } },
} as const);
export const ApiKeyExpiryChanged = defineEvent('ApiKeyExpiryChanged', {
  type: 'object', additionalProperties: false, required: ['keyId', 'expiresAt'],
  properties: { keyId: { type: 'string' }, expiresAt: { type: ['string', 'null'], format: 'date-time' } },
} as const);

// phonenumber-{id}
export const MESSAGING_TIERS = ['TIER_50', 'TIER_250', 'TIER_1000', 'TIER_10000', 'TIER_100000', 'TIER_UNLIMITED'] as const;
const phoneNumber = {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'numberId', 'phoneNumberId', 'displayPhoneNumber', 'verifiedName', 'businessName', 'isPrimary', 'messagingLimitTier', 'qualityRating'],
  properties: {
    companyId: positiveInt, numberId: positiveInt, phoneNumberId: { type: 'string' }, displayPhoneNumber: { type: 'string' },
    verifiedName: { type: 'string' }, businessName: { type: 'string' }, isPrimary: { type: 'boolean' },
    messagingLimitTier: { enum: MESSAGING_TIERS }, qualityRating: { enum: ['GREEN', 'YELLOW', 'RED'] },
  },
} as const;
export const PhoneNumberRegistered = defineEvent('PhoneNumberRegistered', phoneNumber);
export const PhoneNumberDetailsChanged = defineEvent('PhoneNumberDetailsChanged', phoneNumber, {
  description: 'Display number, names or primary flag changed (full state). Tier and rating have their own events.',
});
export const MessagingTierChanged = defineEvent('MessagingTierChanged', {
  type: 'object', additionalProperties: false, required: ['companyId', 'numberId', 'tier'],
  properties: { companyId: positiveInt, numberId: positiveInt, tier: { enum: MESSAGING_TIERS } },
} as const);
export const QualityRatingChanged = defineEvent('QualityRatingChanged', {
  type: 'object', additionalProperties: false, required: ['companyId', 'numberId', 'rating'],
  properties: { companyId: positiveInt, numberId: positiveInt, rating: { enum: ['GREEN', 'YELLOW', 'RED'] } },
} as const);

export const VARIABLE_TYPES = ['TEXT', 'CURRENCY', 'DATE_TIME', 'IMAGE', 'VIDEO', 'DOCUMENT'] as const;
export const TEMPLATE_STATUSES = ['APPROVED', 'PENDING', 'REJECTED', 'PAUSED', 'DISABLED'] as const;
const template = {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'numberId', 'templateId', 'name', 'language', 'category', 'status', 'variables', 'buttons'],
  properties: {
    companyId: positiveInt, numberId: positiveInt, templateId: positiveInt, name: { type: 'string' }, language: { type: 'string' },
    category: { type: 'string' }, status: { enum: TEMPLATE_STATUSES },
    variables: {
      type: 'array',
      items: {
        type: 'object', additionalProperties: false, required: ['name', 'type', 'position', 'isRequired', 'component'],
        properties: {
          name: { type: 'string' }, type: { enum: VARIABLE_TYPES }, position: { type: 'integer', minimum: 0 },
          isRequired: { type: 'boolean' }, component: { enum: ['HEADER', 'BODY', 'FOOTER', 'BUTTON'] },
        },
      },
    },
    buttons: {
      type: 'array',
      items: {
        type: 'object', additionalProperties: false, required: ['type', 'text'],
        properties: {
          type: { enum: ['URL', 'QUICK_REPLY', 'PHONE_NUMBER', 'COPY_CODE'] }, text: { type: 'string' },
          url: { type: 'string' }, phoneNumber: { type: 'string' },
        },
      },
    },
  },
} as const;
export const TemplateRegistered = defineEvent('TemplateRegistered', template);
export const TemplateChanged = defineEvent('TemplateChanged', template, { description: 'Variables, buttons or category changed (full state).' });
export const TemplateStatusChanged = defineEvent('TemplateStatusChanged', {
  type: 'object', additionalProperties: false, required: ['companyId', 'numberId', 'templateId', 'status'],
  properties: { companyId: positiveInt, numberId: positiveInt, templateId: positiveInt, status: { enum: TEMPLATE_STATUSES } },
} as const);

export const CompanyRateLimitSet = defineEvent('CompanyRateLimitSet', {
  type: 'object', additionalProperties: false, required: ['companyId', 'perMinute'],
  properties: { companyId: positiveInt, perMinute: { anyOf: [positiveInt, { type: 'null' }] } },
} as const, { description: "An operator set the company's request limit per API key and minute; null: back to the service default." });

export const provisioningEvents = [
  CompanyRegistered, CompanyProfileChanged, UserRegistered, UserChanged, BranchConfigured, BranchScheduleSet,
  HolidayDeclared, HolidayChanged, AgentRegistered, AgentChanged, OperatorRegistered, OperatorChanged,
  ContactListCreated, ContactListChanged, CustomFieldDefined, CustomFieldChanged,
  ApiKeyIssued, ApiKeyRevoked, ApiKeyExpiryChanged,
  PhoneNumberRegistered, PhoneNumberDetailsChanged, MessagingTierChanged, QualityRatingChanged,
  TemplateRegistered, TemplateChanged, TemplateStatusChanged, CompanyRateLimitSet,
] as const;

export type ProvisioningEvent = EventOf<(typeof provisioningEvents)[number]>;

/** The events of stream `company-{id}` (src/commands/provisioning/company/decider.ts). */
export type CompanyEvent =
  | EventOf<typeof CompanyRegistered> | EventOf<typeof CompanyProfileChanged>
  | EventOf<typeof UserRegistered> | EventOf<typeof UserChanged>
  | EventOf<typeof BranchConfigured> | EventOf<typeof BranchScheduleSet>
  | EventOf<typeof HolidayDeclared> | EventOf<typeof HolidayChanged>
  | EventOf<typeof AgentRegistered> | EventOf<typeof AgentChanged>
  | EventOf<typeof OperatorRegistered> | EventOf<typeof OperatorChanged>
  | EventOf<typeof ContactListCreated> | EventOf<typeof ContactListChanged>
  | EventOf<typeof CustomFieldDefined> | EventOf<typeof CustomFieldChanged>
  | EventOf<typeof CompanyRateLimitSet>;

/** The events of stream `phonenumber-{id}` (src/commands/provisioning/phone-number/decider.ts). */
export type PhoneNumberEvent =
  | EventOf<typeof PhoneNumberRegistered> | EventOf<typeof PhoneNumberDetailsChanged>
  | EventOf<typeof MessagingTierChanged> | EventOf<typeof QualityRatingChanged>
  | EventOf<typeof TemplateRegistered> | EventOf<typeof TemplateChanged> | EventOf<typeof TemplateStatusChanged>;

/** The events of stream `apikey-{keyId}` (src/commands/provisioning/api-key/decider.ts). */
export type ApiKeyEvent = EventOf<typeof ApiKeyIssued> | EventOf<typeof ApiKeyRevoked> | EventOf<typeof ApiKeyExpiryChanged>;
