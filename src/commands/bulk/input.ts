// Pure checks of a send-bulk request's recipients (docs/bulk.md, "Validation"). Every recipient is checked,
// before anything is stored: one bad recipient rejects the whole request, and the messages name it by its
// index in the submitted list: `recipients[3].phone: ...`. Variables are checked with the single send's
// components builder (the same rules and messages).
import { normalizePhone } from '../../shared/phone';
import { nestsDeeperThan } from '../../shared/storable';
import { buildComponents, type TemplateShape } from '../send/components';

export interface BulkRecipientInput {
  /** as submitted: `+` and digits */
  phone: string;
  variables: Record<string, unknown>;
  buttonVariables: Record<string, unknown>;
}

/** At most this many invalid recipients are described; a last message counts the others. */
export const MAX_REPORTED_RECIPIENTS = 20;

export const PHONE_FORMAT = /^\+\d{6,15}$/;
export const PHONE_MESSAGE = 'Enter the phone number in international format: a leading + and digits only, no spaces.';

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Levels of objects and arrays `variables` and `button_variables` may have (their values are scalars or small
 * objects): a value nested thousands deep, in a key the components builder ignores, could not be stored (500).
 */
export const MAX_NESTING = 32;

export type RecipientsCheck = { ok: true; recipients: BulkRecipientInput[] } | { ok: false; messages: string[] };

class Collector {
  readonly messages: string[] = [];
  private invalid = 0;
  private last = -1;

  add(index: number, message: string): void {
    if (index !== this.last) {
      this.invalid++;
      this.last = index;
    }
    if (this.invalid <= MAX_REPORTED_RECIPIENTS) this.messages.push(message);
  }

  result(): string[] | undefined {
    if (this.invalid === 0) return undefined;
    const out = [...this.messages];
    if (this.invalid > MAX_REPORTED_RECIPIENTS) {
      out.push(`${this.invalid - MAX_REPORTED_RECIPIENTS} more invalid recipients (only the first ${MAX_REPORTED_RECIPIENTS} are described).`);
    }
    return out;
  }
}

/** Recipients one request may submit (before deduplication); more: a 400 on `recipients`, nothing checked further. */
export const MAX_RECIPIENTS = 100_000;

/** Shape and phone format of every recipient (needs no read model). */
export function checkRecipients(raw: readonly unknown[]): RecipientsCheck {
  if (raw.length > MAX_RECIPIENTS) return { ok: false, messages: [`Ensure this field has no more than ${MAX_RECIPIENTS} elements.`] };
  const errors = new Collector();
  const recipients: BulkRecipientInput[] = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const r = raw[i];
    const at = `recipients[${i}]`;
    if (!isPlainObject(r)) {
      errors.add(i, `${at}: must be an object with a phone, e.g. {"phone": "+5491155551234", "variables": {}}.`);
      continue;
    }
    const phone = r.phone;
    let ok = true;
    if (phone === undefined || phone === null) {
      errors.add(i, `${at}.phone: This field is required.`);
      ok = false;
    } else if (typeof phone !== 'string') {
      errors.add(i, `${at}.phone: Not a valid string.`);
      ok = false;
    } else if (!PHONE_FORMAT.test(phone)) {
      errors.add(i, `${at}.phone: ${PHONE_MESSAGE}`);
      ok = false;
    }
    for (const [field, value] of [['variables', r.variables], ['button_variables', r.button_variables]] as const) {
      if (value !== undefined && value !== null && !isPlainObject(value)) {
        errors.add(i, `${at}.${field}: must be a JSON object.`);
        ok = false;
      } else if (nestsDeeperThan(value, MAX_NESTING)) {
        errors.add(i, `${at}.${field}: nested too deeply (at most ${MAX_NESTING} levels of objects and lists).`);
        ok = false;
      }
    }
    if (ok) {
      recipients[i] = {
        phone: phone as string,
        variables: (r.variables as Record<string, unknown> | null | undefined) ?? {},
        buttonVariables: (r.button_variables as Record<string, unknown> | null | undefined) ?? {},
      };
    }
  }
  const messages = errors.result();
  return messages ? { ok: false, messages } : { ok: true, recipients };
}

/** Every recipient's variables against the template (the components builder of single sends). */
export function checkRecipientVariables(template: TemplateShape, recipients: readonly BulkRecipientInput[]): string[] | undefined {
  const errors = new Collector();
  for (let i = 0; i < recipients.length; i++) {
    const r = recipients[i];
    const built = buildComponents(template, r.variables, r.buttonVariables);
    if (built.ok) continue;
    for (const [field, messages] of Object.entries(built.errors)) {
      for (const m of messages) errors.add(i, `recipients[${i}].${field}: ${m}`);
    }
  }
  return errors.result();
}

export interface Deduplicated {
  recipients: BulkRecipientInput[];
  /** submitted */
  total: number;
  /** after removing repeated phones */
  unique: number;
}

/**
 * Removes repeated phone numbers, the first occurrence (its spelling and variables) kept: the same `+digits` text,
 * or any spelling of the same number: every phone is normalized (the E.164 the dispatcher sends to and counts quota
 * by), so `+5491155551234`, `+541155551234` and `+54111555551234` (with `15`) are one recipient, as are
 * `+447911123456` and `+4407911123456` (a trunk 0). A phone that does not normalize is kept by its text.
 */
export function deduplicate(recipients: readonly BulkRecipientInput[]): Deduplicated {
  const seen = new Set<string>();
  const out: BulkRecipientInput[] = [];
  for (const r of recipients) {
    const key = normalizePhone(r.phone) ?? r.phone;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(r);
  }
  return { recipients: out, total: recipients.length, unique: out.length };
}
