import { parsePhoneNumberFromString } from 'libphonenumber-js/max';

/**
 * Phone normalization (owned by the contacts feature; keep the exported API stable: sends and the delivery
 * consumer use it). Returns E.164 (`+54911...`) or null when the input cannot be a valid number.
 * Inputs with a country code (with or without `+`) are parsed internationally; without one, only Argentina
 * is assumed (the spec: "no region assumed except Argentina").
 */
export function normalizePhone(raw: string): string | null {
  const input = raw.trim();
  if (input === '' || input.length > 40) return null;
  const digits = input.replace(/[\s\-().]/g, '');
  if (!/^\+?\d+$/.test(digits)) return null;
  const candidates = digits.startsWith('+') ? [digits] : [`+${digits}`, digits];
  for (const c of candidates) {
    const parsed = c.startsWith('+') ? parsePhoneNumberFromString(c) : parsePhoneNumberFromString(c, 'AR');
    if (parsed?.isValid()) return argentineMobile(parsed.number);
  }
  return null;
}

/** Argentine mobiles are stored as +549...; the provider reports them as 549... and `+54 11...` forms exist. */
function argentineMobile(e164: string): string {
  if (e164.startsWith('+54') && !e164.startsWith('+549')) {
    const withNine = `+549${e164.slice(3)}`;
    const parsed = parsePhoneNumberFromString(withNine);
    if (parsed?.isValid() && parsed.getType() === 'MOBILE') return withNine;
  }
  return e164;
}

/** The E.164 forms under which the same number may be stored (for matching stored contacts). */
export function phoneVariants(e164: string): string[] {
  const out = new Set([e164]);
  if (e164.startsWith('+549')) out.add(`+54${e164.slice(4)}`);
  else if (e164.startsWith('+54')) out.add(`+549${e164.slice(3)}`);
  return [...out];
}
