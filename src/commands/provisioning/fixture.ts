import { z } from 'zod';
import { FIELD_TYPES, MESSAGING_TIERS, TEMPLATE_STATUSES, VARIABLE_TYPES } from '../../events/provisioning';
import { scopeOfKey } from '../../shared/api-key';
import { hasUnstorableText, isStorableInstant } from '../../shared/storable';
import { ianaZoneSpelling } from './time-zone';

// The provisioning fixture (`shared/contracts/fixture.md`): its zod schema (strict objects: an unknown field is
// an error) and the cross-reference checks zod cannot express (ids, dangling references, one default list).
// `validateFixture` returns every problem at once, each naming its JSON path.

// What the read models can hold: ids are Postgres `integer`s, and Postgres has no year 0 (a value it cannot store
// would be appended and then stop the projection that applies it).
const id = z.number().int().min(1).max(2_147_483_647);
const time = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d:[0-5]\d$/, 'must be a time of day HH:MM:SS');
const date = z.iso.date('must be a date YYYY-MM-DD').refine((d) => d >= '0001-01-01', 'must be a date from 0001-01-01 on');
const dateTime = z.iso
  .datetime({ offset: true, message: 'must be an ISO 8601 date-time with a zone (e.g. 2026-01-10T12:00:00Z)' })
  .refine((t) => isStorableInstant(Date.parse(t)), 'must be an instant from year 0001 to 9999 (UTC)');
// any letter case; kept as the IANA database spells it (case-sensitive zone libraries refuse another spelling)
const timezone = z
  .string()
  .refine((zone) => ianaZoneSpelling(zone) !== undefined, 'must be an IANA time zone name (e.g. America/Argentina/Buenos_Aires)')
  .transform((zone) => ianaZoneSpelling(zone)!);
const nonBlank = z.string().trim().min(1, 'must not be empty');

export const WEEKDAYS = ['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY', 'SUNDAY'] as const;
export const COMPANY_SIZES = ['MICRO', 'SMALL', 'MEDIUM', 'LARGE', 'ENTERPRISE'] as const;
export const CONTACT_SOURCES = [
  'manual', 'csv_import', 'organic', 'msgapp_sync', 'photoapp_sync', 'directory_contacts', 'group', 'api', 'other',
] as const;
const SELECTOR_TYPES: readonly string[] = ['selector', 'multiselector'];

const user = z.strictObject({
  id,
  email: z.string(),
  first_name: z.string(),
  last_name: z.string(),
});

const companyKey = z.strictObject({
  name: nonBlank,
  key: z.string(),
  userId: id.nullable().default(null),
  active: z.boolean().default(true),
  expiresAt: dateTime.nullable().default(null),
});

const globalKey = z.strictObject({
  name: nonBlank,
  key: z.string(),
  active: z.boolean().default(true),
  expiresAt: dateTime.nullable().default(null),
});

const customField = z.strictObject({
  id,
  key: nonBlank.regex(/^[A-Za-z0-9_.-]+$/, 'must contain only letters, digits, _ . -'),
  name: z.string(),
  fieldType: z.enum(FIELD_TYPES),
  options: z.array(z.string()).nullable().default(null),
  required: z.boolean().default(false),
  group: z.string().nullable().default(null),
});

const contactList = z.strictObject({
  id,
  name: z.string(),
  isDefault: z.boolean().default(false),
  customFields: z.array(customField).default([]),
});

const contact = z.strictObject({
  id: id.optional(),
  contactListId: id,
  fullName: z.string().nullable().default(null),
  phone: nonBlank,
  email: z.string().nullable().default(null),
  source: z.enum(CONTACT_SOURCES).default('manual'),
  sourceDetail: z.string().nullable().default(null),
  profilePicture: z.string().nullable().default(null),
  isTest: z.boolean().default(false),
  createdAt: dateTime,
  customFields: z
    .array(z.strictObject({ key: nonBlank, value: z.array(z.unknown()), expiresAt: dateTime.nullable().default(null) }))
    .default([]),
});

const schedule = z.strictObject({
  id,
  days: z.array(z.enum(WEEKDAYS)),
  startTime: time,
  finishAt: time,
  isActive: z.boolean().default(true),
  description: z.string().default(''),
  specificDate: date.nullable().default(null),
});

const branch = z.strictObject({
  id,
  name: z.string(),
  branchType: z.enum(['PHYSICAL', 'ONLINE']),
  address: z.string().default(''),
  phone: z.string().default(''),
  schedules: z.array(schedule).default([]),
});

const holiday = z.strictObject({
  id,
  name: z.string(),
  description: z.string().default(''),
  date,
  branches: z.array(id).default([]),
  attentionTarget: z.enum(['VIRTUAL_ATTENTION', 'BRANCH', 'ALL_BRANCHES', 'ALL']),
  hasCustomHours: z.boolean().default(false),
  startTime: time.nullable().default(null),
  finishAt: time.nullable().default(null),
  isActive: z.boolean().default(true),
});

const agent = z.strictObject({ id, name: z.string(), version: z.string() });
const operator = z.strictObject({ id, name: z.string() });

const variable = z.strictObject({
  name: nonBlank,
  type: z.enum(VARIABLE_TYPES),
  position: z.number().int().min(0),
  isRequired: z.boolean().default(true),
  component: z.enum(['HEADER', 'BODY', 'FOOTER', 'BUTTON']),
});

const button = z.strictObject({
  type: z.enum(['URL', 'QUICK_REPLY', 'PHONE_NUMBER', 'COPY_CODE']),
  text: z.string(),
  url: z.string().optional(),
  phoneNumber: z.string().optional(),
});

const template = z.strictObject({
  id,
  name: nonBlank,
  language: nonBlank,
  category: nonBlank,
  status: z.enum(TEMPLATE_STATUSES),
  variables: z.array(variable).default([]),
  buttons: z.array(button).default([]),
});

const phoneNumber = z.strictObject({
  id,
  phoneNumberId: nonBlank,
  displayPhoneNumber: z.string(),
  verifiedName: z.string(),
  businessName: z.string(),
  isPrimary: z.boolean().default(false),
  messagingLimitTier: z.enum(MESSAGING_TIERS),
  qualityRating: z.enum(['GREEN', 'YELLOW', 'RED']),
  templates: z.array(template).default([]),
});

const company = z.strictObject({
  id,
  name: nonBlank,
  email: z.string().default(''),
  phone: z.string().default(''),
  website: z.string().default(''),
  address: z.string().default(''),
  description: z.string().default(''),
  timezone,
  companySize: z.enum(COMPANY_SIZES).nullable().default(null),
  companyTypes: z.array(z.enum(['ECOMMERCE', 'CLINIC'])).default([]),
  categories: z.array(z.string()).default([]),
  users: z.array(user).default([]),
  apiKeys: z.array(companyKey).default([]),
  contactLists: z.array(contactList).default([]),
  contacts: z.array(contact).default([]),
  branches: z.array(branch).default([]),
  holidays: z.array(holiday).default([]),
  agents: z.array(agent).default([]),
  operators: z.array(operator).default([]),
  phoneNumbers: z.array(phoneNumber).default([]),
});

export const fixtureSchema = z.strictObject({
  companies: z.array(company),
  globalKeys: z.array(globalKey).default([]),
});

/** The input form (what a fixture file may omit: fields with defaults). */
export type FixtureInput = z.input<typeof fixtureSchema>;
export type Fixture = z.output<typeof fixtureSchema>;
export type FixtureCompany = Fixture['companies'][number];
export type FixturePhoneNumber = FixtureCompany['phoneNumbers'][number];
export type FixtureTemplate = FixturePhoneNumber['templates'][number];
export type FixtureCompanyKey = FixtureCompany['apiKeys'][number];
export type FixtureGlobalKey = Fixture['globalKeys'][number];

export type Path = ReadonlyArray<string | number>;

/** `companies[0].phoneNumbers[0].templates[1].status` */
export function formatPath(path: Path): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? seg : `.${seg}`;
  }
  return out === '' ? '(document)' : out;
}

export interface FixtureIssue {
  path: string;
  message: string;
}

export class FixtureError extends Error {
  constructor(readonly issues: FixtureIssue[]) {
    super(`invalid fixture (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n${issues.map((i) => `  ${i.path}: ${i.message}`).join('\n')}`);
    this.name = 'FixtureError';
  }
}

export type ValidationResult = { ok: true; fixture: Fixture } | { ok: false; issues: FixtureIssue[] };

/**
 * Validates a whole fixture document: shape and types first (zod, strict), then identities and references.
 * `prefix` is the configured API key prefix (keys must be `<prefix>_<secret>` / `<prefix>_global_<secret>`).
 */
export function validateFixture(document: unknown, prefix: string): ValidationResult {
  const parsed = fixtureSchema.safeParse(document);
  if (!parsed.success) {
    const issues: FixtureIssue[] = [];
    for (const issue of parsed.error.issues) {
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys) issues.push({ path: formatPath([...issue.path.map(toSeg), key]), message: 'unknown field' });
      } else {
        issues.push({ path: formatPath(issue.path.map(toSeg)), message: issue.message });
      }
    }
    return { ok: false, issues };
  }
  const issues = [...unstorableText(parsed.data), ...checkReferences(parsed.data, prefix)];
  return issues.length ? { ok: false, issues } : { ok: true, fixture: parsed.data };
}

/** Every string (or object key) Postgres cannot store (U+0000, an unpaired surrogate), by path; iterative. */
function unstorableText(document: unknown): FixtureIssue[] {
  const issues: FixtureIssue[] = [];
  const stack: Array<{ value: unknown; path: Path }> = [{ value: document, path: [] }];
  const add = (path: Path) => issues.push({ path: formatPath(path), message: 'text must not contain NUL (\\u0000) characters or unpaired surrogates' });
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === 'string') {
      if (hasUnstorableText(value)) add(path);
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push({ value: item, path: [...path, i] }));
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        if (hasUnstorableText(key)) add([...path, key]);
        else stack.push({ value: item, path: [...path, key] });
      }
    }
  }
  return issues.reverse();
}

const toSeg = (s: PropertyKey): string | number => (typeof s === 'number' ? s : String(s));

/** Identity, uniqueness and reference rules of the fixture (the document must be self-contained). */
function checkReferences(f: Fixture, prefix: string): FixtureIssue[] {
  const issues: FixtureIssue[] = [];
  const add = (path: Path, message: string) => issues.push({ path: formatPath(path), message });

  // Unique across the whole document: these ids are addressed without their company (API, streams).
  // `secret`: the value is left out of the message (an API key is a credential: `seed` prints its errors, and
  // `keys list` shows no part of a key either); the path of its first occurrence names it.
  const unique = (kind: string, { secret = false } = {}) => {
    const seen = new Map<string | number, string>();
    return (value: string | number, path: Path) => {
      const first = seen.get(value);
      if (first !== undefined) add(path, secret ? `duplicate ${kind} (the same key as at ${first})` : `duplicate ${kind} ${JSON.stringify(value)} (first at ${first})`);
      else seen.set(value, formatPath(path));
    };
  };
  const companyIds = unique('company id');
  const numberIds = unique('phone number id');
  const providerIds = unique('phoneNumberId');
  const templateIds = unique('template id');
  const listIds = unique('contact list id');
  const fieldIds = unique('custom field id');
  const userIds = unique('user id');
  const keys = unique('API key', { secret: true });

  f.companies.forEach((c, ci) => {
    const at = (...rest: Path): Path => ['companies', ci, ...rest];
    companyIds(c.id, at('id'));

    // Unique within the company.
    const perCompany = (kind: string) => unique(kind);
    const branchIds = perCompany('branch id');
    const scheduleIds = perCompany('schedule id');
    const holidayIds = perCompany('holiday id');
    const agentIds = perCompany('agent id');
    const operatorIds = perCompany('operator id');
    const contactIds = perCompany('contact id');

    const users = new Set(c.users.map((u) => u.id));
    c.users.forEach((u, i) => userIds(u.id, at('users', i, 'id')));

    c.apiKeys.forEach((k, i) => {
      keys(k.key, at('apiKeys', i, 'key'));
      if (scopeOfKey(prefix, k.key) !== 'company' || !isKeyText(k.key)) {
        add(at('apiKeys', i, 'key'), `must be a company key ${prefix}_<secret> (secret of at least 9 characters, no spaces)`);
      }
      if (k.userId !== null && !users.has(k.userId)) add(at('apiKeys', i, 'userId'), `unknown user ${k.userId} (not in companies[${ci}].users)`);
    });

    const lists = new Map<number, Set<string>>();
    let defaultList: string | undefined;
    c.contactLists.forEach((l, li) => {
      listIds(l.id, at('contactLists', li, 'id'));
      if (l.isDefault) {
        if (defaultList) add(at('contactLists', li, 'isDefault'), `a company has at most one default list (${defaultList} is already default)`);
        else defaultList = formatPath(at('contactLists', li));
      }
      const fieldKeys = unique('custom field key');
      l.customFields.forEach((cf, fi) => {
        const p = at('contactLists', li, 'customFields', fi);
        fieldIds(cf.id, [...p, 'id']);
        fieldKeys(cf.key, [...p, 'key']);
        if (SELECTOR_TYPES.includes(cf.fieldType)) {
          if (!cf.options || cf.options.length === 0) add([...p, 'options'], `a ${cf.fieldType} needs a non-empty list of options`);
          else if (new Set(cf.options).size !== cf.options.length) add([...p, 'options'], 'options must be distinct');
        } else if (cf.options !== null) {
          add([...p, 'options'], `only selector and multiselector fields have options (this is ${cf.fieldType}); use null`);
        }
      });
      lists.set(l.id, new Set(l.customFields.map((cf) => cf.key)));
    });

    c.contacts.forEach((ct, i) => {
      if (ct.id !== undefined) contactIds(ct.id, at('contacts', i, 'id'));
      const fields = lists.get(ct.contactListId);
      if (!fields) {
        add(at('contacts', i, 'contactListId'), `unknown contact list ${ct.contactListId} (not in companies[${ci}].contactLists)`);
        return;
      }
      const seen = new Set<string>();
      ct.customFields.forEach((v, vi) => {
        if (!fields.has(v.key)) add(at('contacts', i, 'customFields', vi, 'key'), `unknown custom field "${v.key}" of list ${ct.contactListId}`);
        if (seen.has(v.key)) add(at('contacts', i, 'customFields', vi, 'key'), `custom field "${v.key}" appears twice`);
        seen.add(v.key);
      });
    });

    const branches = new Set(c.branches.map((b) => b.id));
    c.branches.forEach((b, bi) => {
      branchIds(b.id, at('branches', bi, 'id'));
      b.schedules.forEach((s, si) => {
        const p = at('branches', bi, 'schedules', si);
        scheduleIds(s.id, [...p, 'id']);
        if (s.specificDate === null && s.days.length === 0) add([...p, 'days'], 'a weekly schedule (specificDate null) needs at least one day');
        if (s.specificDate !== null && s.days.length > 0) add([...p, 'days'], 'a specific-date schedule has no days (use [])');
        if (new Set(s.days).size !== s.days.length) add([...p, 'days'], 'days must be distinct');
        if (s.startTime === s.finishAt) add([...p, 'finishAt'], `${EMPTY_RANGE(s.startTime)}; a whole day is 00:00:00 to 23:59:59`);
      });
    });

    c.holidays.forEach((h, hi) => {
      const p = at('holidays', hi);
      holidayIds(h.id, [...p, 'id']);
      h.branches.forEach((b, i) => {
        if (!branches.has(b)) add([...p, 'branches', i], `unknown branch ${b} (not in companies[${ci}].branches)`);
      });
      if (h.hasCustomHours && (h.startTime === null || h.finishAt === null)) {
        add([...p, h.startTime === null ? 'startTime' : 'finishAt'], 'hasCustomHours needs startTime and finishAt');
      }
      if (!h.hasCustomHours && (h.startTime !== null || h.finishAt !== null)) {
        add([...p, h.startTime !== null ? 'startTime' : 'finishAt'], 'only a holiday with hasCustomHours has startTime/finishAt (use null)');
      }
      if (h.hasCustomHours && h.startTime !== null && h.startTime === h.finishAt) {
        add([...p, 'finishAt'], `${EMPTY_RANGE(h.startTime)}; a day closed throughout has hasCustomHours false`);
      }
    });

    c.agents.forEach((a, i) => agentIds(a.id, at('agents', i, 'id')));
    c.operators.forEach((o, i) => operatorIds(o.id, at('operators', i, 'id')));

    c.phoneNumbers.forEach((n, ni) => {
      const p = at('phoneNumbers', ni);
      numberIds(n.id, [...p, 'id']);
      providerIds(n.phoneNumberId, [...p, 'phoneNumberId']);
      const nameLang = unique('template name and language');
      n.templates.forEach((t, ti) => {
        const tp = [...p, 'templates', ti];
        templateIds(t.id, [...tp, 'id']);
        nameLang(`${t.name}/${t.language}`, [...tp, 'name']);
        const varNames = unique('variable name');
        const slots = unique('variable component and position');
        t.variables.forEach((v, vi) => {
          varNames(v.name, [...tp, 'variables', vi, 'name']);
          slots(`${v.component} ${v.position}`, [...tp, 'variables', vi, 'position']);
        });
        t.buttons.forEach((b, bi) => {
          const bp = [...tp, 'buttons', bi];
          if (b.type === 'URL' && !b.url) add([...bp, 'url'], 'a URL button needs url');
          if (b.type !== 'URL' && b.url !== undefined) add([...bp, 'url'], `only URL buttons have url (this is ${b.type})`);
          if (b.type === 'PHONE_NUMBER' && !b.phoneNumber) add([...bp, 'phoneNumber'], 'a PHONE_NUMBER button needs phoneNumber');
          if (b.type !== 'PHONE_NUMBER' && b.phoneNumber !== undefined) add([...bp, 'phoneNumber'], `only PHONE_NUMBER buttons have phoneNumber (this is ${b.type})`);
        });
      });
    });
  });

  f.globalKeys.forEach((k, i) => {
    keys(k.key, ['globalKeys', i, 'key']);
    if (scopeOfKey(prefix, k.key) !== 'global' || !isKeyText(k.key)) {
      add(['globalKeys', i, 'key'], `must be a global key ${prefix}_global_<secret> (secret of at least 9 characters, no spaces)`);
    }
  });
  return issues;
}

/** A range of opening hours from a time to the same time is open for no time at all (docs/provisioning.md). */
const EMPTY_RANGE = (time: string): string => `must differ from startTime (both ${time}: the range is empty)`;

/** What auth accepts as key text (see src/http/auth.ts): no whitespace, at most 512 characters. */
const isKeyText = (key: string): boolean => key.length <= 512 && !/\s/.test(key);
