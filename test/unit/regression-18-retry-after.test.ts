import { retryAfterMs } from '../../src/shared/retry-after';

// Regression review 18 (docs/reliability.md): 281c74d read Retry-After's HTTP-dates strictly (the three RFC 9110
// forms), and a date that names its zone in the Internet Message Format's other spellings (RFC 5322: a one-digit
// day, other spacing, UT/UTC, a numeric offset such as Python's email.utils.formatdate's -0000), honoured before by
// Date.parse, became no Retry-After: the endpoint's or provider's asked wait was ignored. They are read again, in
// their named zone; a date naming no zone, or a zone by an abbreviation other than GMT/UT/UTC, is still none.

const NOW = new Date('2026-10-21T07:00:00.000Z');
const MIN = 60_000;

describe('Retry-After: an Internet Message Format date naming its zone', () => {
  it.each([
    ['Wed, 21 Oct 2026 07:28:00 GMT', 28 * MIN],
    ['wed, 21 oct 2026 07:28:00 gmt', 28 * MIN],
    ['Wed,  21 Oct 2026 07:28:00 GMT', 28 * MIN],
    ['Wed, 21 Oct 2026  07:28:00 GMT', 28 * MIN],
    ['21 Oct 2026 07:28:00 GMT', 28 * MIN],
    ['Wed, 21 Oct 2026 07:28:00 UTC', 28 * MIN],
    ['Wed, 21 Oct 2026 07:28:00 UT', 28 * MIN],
    ['Wed, 21 Oct 2026 07:28:00 +0000', 28 * MIN],
    ['Wed, 21 Oct 2026 07:28:00 -0000', 28 * MIN],
    ['Wed, 21 Oct 2026 09:28:00 +0200', 28 * MIN],
    ['Wed, 21 Oct 2026 02:58:00 -0430', 28 * MIN],
    ['Thu, 1 Oct 2026 07:28:00 GMT', 0],
    ['Sat, 1 Jan 2028 00:00:00 GMT', Date.UTC(2028, 0, 1) - NOW.getTime()],
  ])('%s is honoured', (header, wait) => {
    expect(retryAfterMs(header, NOW)).toBe(wait);
  });

  it.each([
    'Wed, 21 Oct 2026 07:28:00', // no zone
    'Wed, 21 Oct 2026 07:28:00 PST',
    'Wed, 21 Oct 2026 07:28:00 +2400',
    'Wed, 21 Oct 2026 07:28:00 +0060',
    'Wed, 31 Nov 2026 07:28:00 +0000',
    'Wed, 21 Oct 2026 24:00:00 UTC',
    '2026-10-21T07:28:00Z',
  ])('%s is no Retry-After', (header) => {
    expect(retryAfterMs(header, NOW)).toBeUndefined();
  });
});
