// Pure checks of a send-bulk request's recipients (docs/bulk.md, "Validation"). Every recipient is checked,
// before anything is stored: one bad recipient rejects the whole request, and the messages name it by its
// index in the submitted list: `recipients[3].phone: ...`. Variables are checked with the single send's
// components builder (the same rules and messages).
import { normalizePhone, sendPhoneProblem } from '../../shared/phone';
import { nestsDeeperThan } from '../../shared/storable';
import { buildComponents, type TemplateShape } from '../send/components';
import { forEachInTurns, Turns } from '../../shared/turns';

export interface BulkRecipientInput {
  /** as submitted: `+` and digits */
  phone: string;
  variables: Record<string, unknown>;
  buttonVariables: Record<string, unknown>;
}

/** At most this many invalid recipients are described; a last message counts the others. */
export const MAX_REPORTED_RECIPIENTS = 20;

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

  /** whether a recipient was invalid */
  get any(): boolean {
    return this.invalid > 0;
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

const TOO_MANY = `Ensure this field has no more than ${MAX_RECIPIENTS} elements.`;

/**
 * Whether `variables` or `button_variables` nests deeper than MAX_NESTING, as `nestsDeeperThan` says, without its
 * allocations for the usual flat object (every value a scalar: one level).
 */
function nestsTooDeeply(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== null && typeof v === 'object') return nestsDeeperThan(value, MAX_NESTING);
  }
  return false;
}

/** `variables` / `button_variables` of recipient `i`: messages for a value that is no object or nests too deeply. */
function checkObjectField(errors: Collector, i: number, field: 'variables' | 'button_variables', value: unknown): boolean {
  if (value !== undefined && value !== null && !isPlainObject(value)) {
    errors.add(i, `recipients[${i}].${field}: must be a JSON object.`);
    return false;
  }
  if (nestsTooDeeply(value)) {
    errors.add(i, `recipients[${i}].${field}: nested too deeply (at most ${MAX_NESTING} levels of objects and lists).`);
    return false;
  }
  return true;
}

/** One recipient's shape and phone format: the recipient, or undefined (its messages added to `errors`). */
function checkRecipient(errors: Collector, r: unknown, i: number): BulkRecipientInput | undefined {
  if (!isPlainObject(r)) {
    errors.add(i, `recipients[${i}]: must be an object with a phone, e.g. {"phone": "+5491155551234", "variables": {}}.`);
    return undefined;
  }
  const phone = r.phone;
  let ok = true;
  if (phone === undefined || phone === null) {
    errors.add(i, `recipients[${i}].phone: This field is required.`);
    ok = false;
  } else if (typeof phone !== 'string') {
    errors.add(i, `recipients[${i}].phone: Not a valid string.`);
    ok = false;
  } else {
    const problem = sendPhoneProblem(phone);
    if (problem !== undefined) {
      errors.add(i, `recipients[${i}].phone: ${problem}`);
      ok = false;
    }
  }
  if (!checkObjectField(errors, i, 'variables', r.variables)) ok = false;
  if (!checkObjectField(errors, i, 'button_variables', r.button_variables)) ok = false;
  if (!ok) return undefined;
  return {
    phone: phone as string,
    variables: (r.variables as Record<string, unknown> | null | undefined) ?? {},
    buttonVariables: (r.button_variables as Record<string, unknown> | null | undefined) ?? {},
  };
}

/** Shape and phone format of every recipient (needs no read model). */
export function checkRecipients(raw: readonly unknown[]): RecipientsCheck {
  if (raw.length > MAX_RECIPIENTS) return { ok: false, messages: [TOO_MANY] };
  const errors = new Collector();
  const recipients: BulkRecipientInput[] = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const r = checkRecipient(errors, raw[i], i);
    if (r) recipients[i] = r;
  }
  const messages = errors.result();
  return messages ? { ok: false, messages } : { ok: true, recipients };
}

/** `checkRecipients`, giving the event loop a turn between slices of recipients (the same answer). */
export async function checkRecipientsInTurns(raw: readonly unknown[], turns: Turns = new Turns()): Promise<RecipientsCheck> {
  if (raw.length > MAX_RECIPIENTS) return { ok: false, messages: [TOO_MANY] };
  const errors = new Collector();
  const recipients: BulkRecipientInput[] = new Array(raw.length);
  await forEachInTurns(raw.length, (i) => {
    const r = checkRecipient(errors, raw[i], i);
    if (r) recipients[i] = r;
  }, turns);
  const messages = errors.result();
  return messages ? { ok: false, messages } : { ok: true, recipients };
}

/** Recipient `i`'s variables against the template; its messages added to `errors`. */
function checkVariables(errors: Collector, template: TemplateShape, r: BulkRecipientInput, i: number): void {
  const built = buildComponents(template, r.variables, r.buttonVariables);
  if (built.ok) return;
  for (const [field, messages] of Object.entries(built.errors)) {
    for (const m of messages) errors.add(i, `recipients[${i}].${field}: ${m}`);
  }
}

/** Every recipient's variables against the template (the components builder of single sends). */
export function checkRecipientVariables(template: TemplateShape, recipients: readonly BulkRecipientInput[]): string[] | undefined {
  const errors = new Collector();
  for (let i = 0; i < recipients.length; i++) checkVariables(errors, template, recipients[i], i);
  return errors.result();
}

export interface Deduplicated {
  recipients: BulkRecipientInput[];
  /** submitted */
  total: number;
  /** after removing repeated phones */
  unique: number;
}

/** The kept recipients so far: the first of each phone (see `deduplicate`). */
class Deduplicator {
  /** normalized phones (or the text of one that does not normalize) kept */
  private readonly seen = new Set<string>();
  /** texts met: the same text again is a repeat without normalizing it again */
  private readonly texts = new Set<string>();
  readonly kept: BulkRecipientInput[] = [];
  total = 0;

  add(r: BulkRecipientInput): void {
    this.total++;
    if (this.texts.has(r.phone)) return;
    this.texts.add(r.phone);
    const key = normalizePhone(r.phone) ?? r.phone;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.kept.push(r);
  }

  result(): Deduplicated {
    return { recipients: this.kept, total: this.total, unique: this.kept.length };
  }
}

/**
 * Removes repeated phone numbers, the first occurrence (its spelling and variables) kept: the same `+digits` text,
 * or any spelling of the same number: every phone is normalized (the E.164 the dispatcher sends to and counts quota
 * by), so `+5491155551234`, `+541155551234` and `+54111555551234` (with `15`) are one recipient, as are
 * `+447911123456` and `+4407911123456` (a trunk 0). A phone that does not normalize is kept by its text.
 */
export function deduplicate(recipients: readonly BulkRecipientInput[]): Deduplicated {
  const d = new Deduplicator();
  for (const r of recipients) d.add(r);
  return d.result();
}

export type VariablesAndDeduplication = ({ ok: true } & Deduplicated) | { ok: false; messages: string[] };

/**
 * `checkRecipientVariables` and then `deduplicate`, in one pass over the recipients, giving the event loop a turn
 * between slices (the same answers). Once a recipient is invalid the answer is its 400: phones are not normalized
 * any more.
 */
export async function checkVariablesAndDeduplicate(
  template: TemplateShape,
  recipients: readonly BulkRecipientInput[],
  turns: Turns = new Turns(),
): Promise<VariablesAndDeduplication> {
  const errors = new Collector();
  const dedupe = new Deduplicator();
  await forEachInTurns(recipients.length, (i) => {
    const r = recipients[i];
    checkVariables(errors, template, r, i);
    if (!errors.any) dedupe.add(r);
  }, turns);
  const messages = errors.result();
  return messages ? { ok: false, messages } : { ok: true, ...dedupe.result() };
}
