import { parsePhoneNumberFromString, type PhoneNumber } from 'libphonenumber-js/max';

/**
 * Phone normalization (owned by the contacts feature; the exported API is stable: sends and the delivery
 * consumer use it). All parsing and validation is libphonenumber-js with the full ("max") metadata.
 *
 * `normalizePhone(raw)` returns the canonical E.164 form (`+5491155551234`) or null when the input cannot be a
 * valid number. Rules (docs/contacts.md, "Phone numbers"):
 *  - Separators are ignored: spaces, dashes, dots, parentheses (and a `tel:` prefix). Anything else but digits
 *    and one leading `+` makes the input invalid.
 *  - With `+` (or the `00` international prefix) the number is parsed internationally.
 *  - Without `+`, the digits are read both as an international number (E.164 without `+`) and as an Argentine
 *    national number (`011 15 5555-1234`, `11 15 5555 1234`, `9 11 5555 1234`, `11 5555 1234`): the valid
 *    reading wins; when both are valid and differ, Argentina wins (the only region ever assumed).
 *  - Argentine numbers are canonical in the mobile form `+549…` whenever that form is a valid mobile number:
 *    the provider reports mobiles as `54 11…` (without the 9) and people write them with `15`; all of them are
 *    the same messaging number. Mexican `+521…` (the provider's old mobile form) becomes `+52…`.
 */
export function normalizePhone(raw: string): string | null {
  if (typeof raw !== 'string') return null;
  // a long input is never a number, and remembering it would keep a client's megabyte string alive
  if (raw.length > MEMO_INPUT_MAX) return normalizeUncached(raw);
  const hit = memo.get(raw);
  if (hit !== undefined) return hit;
  const result = normalizeUncached(raw);
  if (memo.size >= MEMO_SIZE) memo.clear();
  memo.set(raw, result);
  return result;
}

// normalizePhone is pure and sits on every contacts request: remember recent answers (bounded).
const MEMO_SIZE = 10_000;
const MEMO_INPUT_MAX = 64;
const memo = new Map<string, string | null>();

function normalizeUncached(raw: string): string | null {
  let input = raw.trim();
  if (input.toLowerCase().startsWith('tel:')) input = input.slice(4);
  if (input === '' || input.length > 40) return null;
  // separators: spaces, dots, parentheses and dashes, the Unicode ones too (a number copied from a document)
  const compact = input.replace(/[\s\-().\u00a0\u2010-\u2015\u2212\uff0d]/g, '');
  if (!/^\+?\d{4,20}$/.test(compact)) return null;

  if (compact.startsWith('+')) return canonical(parsePhoneNumberFromString(compact));
  if (compact.startsWith('00')) return canonical(parsePhoneNumberFromString(`+${compact.slice(2)}`));
  const international = canonical(parsePhoneNumberFromString(`+${compact}`));
  const argentine = canonical(parsePhoneNumberFromString(compact, 'AR'));
  return argentine ?? international;
}

function canonical(parsed: PhoneNumber | undefined): string | null {
  if (!parsed) return null;
  const e164 = parsed.number;
  if (parsed.isValid()) {
    if (parsed.countryCallingCode === '54' && !e164.startsWith('+549')) return validMobile(`+549${e164.slice(3)}`) ?? e164;
    return e164;
  }
  // Mexico: `+52 1 55 1234 5678` (the old mobile prefix the provider still reports) is `+52 55 1234 5678`.
  if (e164.startsWith('+521') && e164.length === 14) return valid(`+52${e164.slice(4)}`);
  return null;
}

function valid(e164: string): string | null {
  const p = parsePhoneNumberFromString(e164);
  return p?.isValid() ? p.number : null;
}

function validMobile(e164: string): string | null {
  const p = parsePhoneNumberFromString(e164);
  return p?.isValid() && p.getType() === 'MOBILE' ? p.number : null;
}

/**
 * The E.164 forms under which the same number may be stored or reported (for matching stored contacts and
 * messages): the canonical form first. Argentina: `+549XX…` and `+54XX…`; Mexico: `+52…` and `+521…`.
 */
export function phoneVariants(e164: string): string[] {
  const out = new Set([e164]);
  if (e164.startsWith('+549')) out.add(`+54${e164.slice(4)}`);
  else if (e164.startsWith('+54')) out.add(`+549${e164.slice(3)}`);
  else if (e164.startsWith('+521') && e164.length === 14) out.add(`+52${e164.slice(4)}`);
  else if (e164.startsWith('+52') && e164.length === 13) out.add(`+521${e164.slice(3)}`);
  return [...out];
}

/** normalizePhone, then its variants; [] when the input is not a valid number. */
export function phoneMatchKeys(raw: string): string[] {
  const e164 = normalizePhone(raw);
  return e164 ? phoneVariants(e164) : [];
}

/** What the sends ask of a recipient (docs/sends.md): `+` and 6 to 15 digits, as the single send's route checks it. */
export const SEND_PHONE_FORMAT = /^\+\d{6,15}$/;
export const SEND_PHONE_MESSAGE = 'Enter the phone number in international format: a leading + and digits only, no spaces.';
export const COUNTRY_CODE_MESSAGE = 'Enter the phone number in international format: a leading + and the country code, which never starts with 0.';

/**
 * Why a send's recipient (`+` and digits) cannot be a number, or undefined: not in SEND_PHONE_FORMAT, or a country
 * calling code starting with 0, which none does (E.164). Only that is refused beyond the format: whether the rest is
 * a number in use is the provider's to say (a `+00…` is a `00` international prefix written after the `+`).
 */
export function sendPhoneProblem(phone: string): string | undefined {
  if (!SEND_PHONE_FORMAT.test(phone)) return SEND_PHONE_MESSAGE;
  if (!hasCountryCode(phone)) return COUNTRY_CODE_MESSAGE;
  return undefined;
}

/**
 * False only for a phone in SEND_PHONE_FORMAT whose country calling code starts with 0 (COUNTRY_CODE_MESSAGE): the
 * single send's route refines its pattern with it, so such a recipient is a field error beside the body's others, as
 * any phone out of format is (regression review 19), one message a phone. Not in SEND_PHONE_FORMAT itself: its
 * message would become SEND_PHONE_MESSAGE, and the pattern is the OpenAPI document's.
 */
export const hasCountryCode = (phone: string): boolean => !SEND_PHONE_FORMAT.test(phone) || phone[1] !== '0';
