/**
 * The wait a `Retry-After` header asks for (RFC 9110: delay-seconds or an HTTP-date), from `now`, never negative;
 * undefined when it is not one of those.
 */
export function retryAfterMs(value: string, now: Date): number | undefined {
  const v = value.trim();
  const ms = /^[0-9]+$/.test(v) ? Number(v) * 1000 : httpDate(v, now) - now.getTime();
  return Number.isNaN(ms) ? undefined : Math.max(0, ms);
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
// RFC 9110, 5.6.7: the IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient must also accept
const IMF_FIXDATE = /^[a-z]{3}, (\d{2}) ([a-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/i;
const RFC850_DATE = /^[a-z]{6,9}, (\d{2})-([a-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/i;
const ASCTIME_DATE = /^[a-z]{3} ([a-z]{3}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/i;
// The Internet Message Format's own date-time (RFC 5322, 3.3), of which the IMF-fixdate is the fixed spelling, naming
// its zone: a one-digit day, other spacing, UT/UTC, or a numeric offset (Python's email.utils.formatdate: -0000).
// Date.parse honoured these before 281c74d (regression review 18): the zone is named, so no process zone is involved.
// The seconds are optional there, and a comment may follow the zone (`+0000 (UTC)`): read too (regression review 19).
const ZONED_DATE = /^(?:[a-z]{3},\s*)?(\d{1,2})\s+([a-z]{3})\s+(\d{4})\s+(\d{2}):(\d{2})(?::(\d{2}))?\s+(GMT|UTC?|[+-]\d{4})(?:\s*\([^()]*\))?$/i;

/**
 * An HTTP-date as epoch milliseconds, NaN when `v` is none. All three forms are GMT, asctime's too though it names no
 * zone: Date.parse read that one (and any date without a zone) in the process's own time zone.
 */
function httpDate(v: string, now: Date): number {
  let m: RegExpExecArray | null;
  let parts: [year: number, month: string, day: string, h: string, mi: string, s: string];
  if ((m = IMF_FIXDATE.exec(v))) parts = [Number(m[3]), m[2], m[1], m[4], m[5], m[6]];
  else if ((m = RFC850_DATE.exec(v))) parts = [rfc850Year(Number(m[3]), now), m[2], m[1], m[4], m[5], m[6]];
  else if ((m = ASCTIME_DATE.exec(v))) parts = [Number(m[6]), m[1], m[2], m[3], m[4], m[5]];
  else if ((m = ZONED_DATE.exec(v))) return zonedDate(m);
  else return NaN;
  const [year, mon, day, h, mi, s] = parts;
  const month = MONTHS.indexOf(mon.toLowerCase());
  const at = new Date(0);
  at.setUTCFullYear(year, month, Number(day));
  at.setUTCHours(Number(h), Number(mi), Number(s));
  // a day or a time the calendar has not (30 Feb, 24:00:00) rolls over: not a date
  const exact = month >= 0 && at.getUTCDate() === Number(day) && at.getUTCMonth() === month && at.getUTCHours() === Number(h)
    && at.getUTCMinutes() === Number(mi) && at.getUTCSeconds() === Number(s);
  return exact ? at.getTime() : NaN;
}

/** A ZONED_DATE match as epoch milliseconds: its GMT reading less its zone's offset (NaN: not a date, or no offset). */
function zonedDate(m: RegExpExecArray): number {
  const gmt = httpDate(`Mon, ${m[1].padStart(2, '0')} ${m[2]} ${m[3]} ${m[4]}:${m[5]}:${m[6] ?? '00'} GMT`, new Date(0));
  const zone = m[7];
  if (!/^[+-]/.test(zone)) return gmt;
  const hours = Number(zone.slice(1, 3));
  const minutes = Number(zone.slice(3, 5));
  if (hours > 23 || minutes > 59) return NaN;
  return gmt - (zone[0] === '-' ? -1 : 1) * (hours * 60 + minutes) * 60_000;
}

/** RFC 9110: a two-digit year more than 50 years in the future is the most recent past year with those digits. */
function rfc850Year(yy: number, now: Date): number {
  const current = now.getUTCFullYear();
  let year = current - (current % 100) + yy;
  if (year > current + 50) year -= 100;
  return year;
}

/**
 * The `Retry-After` (seconds) of a 503 DATABASE_UNAVAILABLE (src/http/errors.ts): Postgres could not be reached, or a
 * read lost its connection. A restart or a failover takes seconds; asking for less would have clients and load
 * balancers repeat into the outage, asking for more would keep them away after it.
 */
export const DATABASE_UNAVAILABLE_RETRY_AFTER_S = 5;
