// ISO 8601 instants as clients and producers write them: `YYYY-MM-DDTHH:MM[:SS[.fff…]]` with `Z` or an offset
// `±HH`, `±HHMM` or `±HH:MM` (basic and extended formats alike), and, where a zone may be left out (the export's
// query), `YYYY-MM-DD` or a time without a zone, read as UTC. Millisecond precision; years as written.

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?\s*(Z|z|[+\- ]\d{2}(?::?\d{2})?)?)?$/;
const STRICT_ISO = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|z|[+-]\d{2}(?::?\d{2})?)$/;

export interface IsoInstantOptions {
  /**
   * `required`: a date-time with its zone, nothing else (a record's `occurredAt`). `utc-if-missing`: also a date
   * (midnight) or a time without a zone, read as UTC, and a space for a `+` the query string decoded (the export).
   */
  zone: 'required' | 'utc-if-missing';
}

/** The instant, or undefined when `raw` is not one (a day or an hour out of range included). */
export function parseIsoInstant(raw: string, options: IsoInstantOptions): Date | undefined {
  const m = (options.zone === 'required' ? STRICT_ISO : ISO).exec(raw.trim());
  if (!m) return undefined;
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone = 'Z'] = m;
  const year = Number(y), month = Number(mo), day = Number(d), hour = Number(h), minute = Number(mi), second = Number(s);
  const daysInMonth = utcDate(year, month, 0).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMin = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone[0] === '-' ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2)), om = Number(digits.slice(2) || '0');
    if (oh > 23 || om > 59) return undefined;
    offsetMin = sign * (oh * 60 + om);
  }
  const ms = Number((frac + '000').slice(0, 3));
  const local = utcDate(year, month - 1, day);
  local.setUTCHours(hour, minute, second, ms);
  return new Date(local.getTime() - offsetMin * 60_000);
}

/** Midnight UTC of a day, the year taken as written: Date.UTC reads years 0-99 as 1900-1999. */
function utcDate(year: number, monthIndex: number, day: number): Date {
  const date = new Date(0);
  date.setUTCFullYear(year, monthIndex, day);
  return date;
}
