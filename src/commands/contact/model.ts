import type { ContactListInfo, FieldDef, FieldScalar, FieldType, FieldVersion } from '../../events/contacts';
import { isStorableInstant } from '../../shared/storable';

// Pure domain rules of contacts and their versioned custom fields (no I/O). The shapes are src/events/contacts.ts's.

export type { ContactListInfo, FieldDef, FieldScalar, FieldType, FieldVersion };

/** The value a reader sees at `now`: a value that expired (expiresAt <= now) or was cleared is no value. */
export function activeValue(v: FieldVersion | undefined, now: Date): { value: FieldScalar[]; expiresAt: string | null } | null {
  if (!v || v.value === null) return null;
  if (v.expiresAt !== null && Date.parse(v.expiresAt) <= now.getTime()) return null;
  return { value: v.value, expiresAt: v.expiresAt };
}

/** One element of a view's custom-field array (snake_case, as the spec's resources section). */
export interface CustomFieldView {
  id: number;
  key: string;
  name: string;
  field_type: FieldType;
  options: string[] | null;
  required: boolean;
  value: FieldScalar[] | null;
  version: number | null;
  expires_at: string | null;
}

/**
 * Every custom field of the list, with its value as seen at `now`. A field never set: value, version and
 * expires_at null. Cleared: value null, the clearing version, expires_at null. Expired: value null, the version
 * and its (past) expires_at, so a client can tell why the value is gone.
 */
export function customFieldViews(fields: readonly FieldDef[], values: ReadonlyMap<number, FieldVersion>, now: Date): CustomFieldView[] {
  return fields.map((f) => {
    const v = values.get(f.id);
    const active = activeValue(v, now);
    return {
      id: f.id,
      key: f.key,
      name: f.name,
      field_type: f.fieldType,
      options: f.options,
      required: f.required,
      value: active ? active.value : null,
      version: v ? v.version : null,
      expires_at: v && v.value !== null ? v.expiresAt : null,
    };
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Value validation per field type. Returns the canonical value or an error message (without the field prefix).

const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATETIME_RE = /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(?:\.\d{1,9})?)?(Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)$/i;
const TIME_RE = /^([01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)?$/;
/** local@label.label...: the domain's labels are not empty ("a@..", "a@b..co" and "a@b.co." are not addresses) */
const EMAIL_RE = /^[^\s@"'<>(),;:\\[\]]+@(?:[^\s@"'<>(),;:\\[\].]+\.)+[^\s@"'<>(),;:\\[\].]+$/;
const INT_RE = /^[+-]?\d+$/;
const FLOAT_RE = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

export const MAX_STRING = 255;
export const MAX_TEXT = 10_000;

/** Whether `s` is longer than `max` characters (code points, as Postgres counts them: an emoji is one, not two). */
export function longerThan(s: string, max: number): boolean {
  if (s.length <= max) return false;
  let n = 0;
  for (const _ of s) if (++n > max) return true;
  return false;
}

function validCalendarDate(y: number, m: number, d: number): boolean {
  if (m < 1 || m > 12 || d < 1) return false;
  const days = new Date(Date.UTC(y, m, 0)).getUTCDate();
  return d <= days;
}

export function isValidDate(s: string): boolean {
  const m = DATE_RE.exec(s);
  return !!m && validCalendarDate(Number(m[1]), Number(m[2]), Number(m[3]));
}

/** ISO 8601 date-time with a zone (Z or ±HH:MM). */
export function isValidDateTime(s: string): boolean {
  const m = DATETIME_RE.exec(s);
  return !!m && validCalendarDate(Number(m[1]), Number(m[2]), Number(m[3])) && !Number.isNaN(Date.parse(s));
}

/** An instant given as an ISO 8601 string that Postgres can store: year 1 to 9999 once in UTC. */
export const isStorableDateTime = (s: string): boolean => isStorableInstant(Date.parse(s));

/** The message for a well-formed date-time outside the storable years, after the name of what holds it. */
export const UNSTORABLE_DATETIME = 'must be an instant from year 0001 to 9999 (UTC)';

export const isValidEmail = (s: string): boolean => s.length <= 254 && EMAIL_RE.test(s);

export function isValidHttpUrl(s: string): boolean {
  if (s.length > 2048 || /\s/.test(s)) return false;
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

/**
 * The configured option a value names, as configured. Canonically equivalent spellings are one option: "ñ" typed
 * precomposed (NFC) or as "n" and a combining tilde (NFD, as macOS and some keyboards send it).
 */
function optionNamed(options: readonly string[], v: unknown): string | undefined {
  if (typeof v !== 'string') return undefined;
  if (options.includes(v)) return v;
  const nfc = v.normalize('NFC');
  return options.find((o) => o.normalize('NFC') === nfc);
}

/** Validates a request value (the `value` array) for a field; `[]` is handled by the caller (no value). */
export function canonicalValue(def: FieldDef, raw: readonly unknown[]): { ok: true; value: FieldScalar[] } | { ok: false; error: string } {
  const fail = (error: string) => ({ ok: false as const, error });
  if (def.fieldType !== 'multiselector' && raw.length > 1) {
    return fail(`a ${def.fieldType} field takes exactly one value (got ${raw.length}); only multiselector fields take several`);
  }
  const one = raw[0];
  switch (def.fieldType) {
    case 'string':
    case 'text':
    case 'textarea': {
      if (typeof one !== 'string') return fail(`value must be a string`);
      const max = def.fieldType === 'string' ? MAX_STRING : MAX_TEXT;
      if (longerThan(one, max)) return fail(`value is longer than ${max} characters`);
      return { ok: true, value: [one] };
    }
    case 'int': {
      const n = typeof one === 'number' ? one : typeof one === 'string' && INT_RE.test(one.trim()) ? Number(one.trim()) : NaN;
      if (!Number.isSafeInteger(n)) return fail('value must be an integer');
      return { ok: true, value: [n] };
    }
    case 'float': {
      const n = typeof one === 'number' ? one : typeof one === 'string' && FLOAT_RE.test(one.trim()) ? Number(one.trim()) : NaN;
      if (!Number.isFinite(n)) return fail('value must be a number');
      return { ok: true, value: [n] };
    }
    case 'email':
      if (typeof one !== 'string' || !isValidEmail(one)) return fail('value must be a valid email address');
      return { ok: true, value: [one] };
    case 'url':
      if (typeof one !== 'string' || !isValidHttpUrl(one)) return fail('value must be a valid http(s) URL');
      return { ok: true, value: [one] };
    case 'date':
      if (typeof one !== 'string' || !isValidDate(one)) return fail('value must be a date YYYY-MM-DD');
      return { ok: true, value: [one] };
    case 'datetime':
      if (typeof one !== 'string' || !isValidDateTime(one)) {
        return fail('value must be an ISO 8601 date-time with a zone (e.g. 2026-01-10T12:00:00Z)');
      }
      if (!isStorableDateTime(one)) return fail(`value ${UNSTORABLE_DATETIME}`);
      return { ok: true, value: [one] };
    case 'time':
      if (typeof one !== 'string' || !TIME_RE.test(one)) return fail('value must be a time HH:MM or HH:MM:SS');
      return { ok: true, value: [one] };
    case 'selector': {
      const options = def.options ?? [];
      const option = optionNamed(options, one);
      if (option === undefined) return fail(`value must be one of ${JSON.stringify(options)}`);
      return { ok: true, value: [option] };
    }
    case 'multiselector': {
      const options = def.options ?? [];
      const chosen = raw.map((v) => optionNamed(options, v));
      const bad = chosen.indexOf(undefined);
      if (bad >= 0) return fail(`${JSON.stringify(raw[bad])} is not an option; options are ${JSON.stringify(options)}`);
      if (new Set(chosen).size !== chosen.length) return fail('values must be distinct');
      // canonical order: the configured order of the options (a reordered selection is the same value)
      return { ok: true, value: options.filter((o) => chosen.includes(o)) };
    }
  }
}

export const sameValue = (a: readonly FieldScalar[] | null, b: readonly FieldScalar[] | null): boolean =>
  a === b || (a !== null && b !== null && a.length === b.length && a.every((x, i) => x === b[i]));

/** Canonical form of an instant (UTC, milliseconds): two spellings of one instant are one expiry. */
export const canonicalInstant = (s: string): string => new Date(Date.parse(s)).toISOString();
