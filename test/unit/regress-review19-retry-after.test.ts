import { retryAfterMs } from '../../src/shared/retry-after';

// Regression review 19: d4dba81 read again the Internet Message Format dates naming their zone that Date.parse had
// honoured before 281c74d, but not two spellings RFC 5322 (3.3) gives them and Date.parse read: a time without its
// seconds (`hour ":" minute [":" second]`), and a comment after the zone (`+0000 (UTC)`, as mail software writes it).
// Both name their zone, so no process zone is involved; the asked wait was ignored.

const NOW = new Date('2026-10-21T07:00:00.000Z');
const MIN = 60_000;

describe('Retry-After: RFC 5322 dates without seconds or with a comment after the zone', () => {
  it.each([
    ['Wed, 21 Oct 2026 07:28 GMT', 28 * MIN],
    ['Wed, 21 Oct 2026 09:28 +0200', 28 * MIN],
    ['21 Oct 2026 07:28 UTC', 28 * MIN],
    ['Wed, 21 Oct 2026 07:28:00 +0000 (UTC)', 28 * MIN],
    ['Wed, 21 Oct 2026 02:58:00 -0430 (VET)', 28 * MIN],
    ['Wed, 21 Oct 2026 07:28 +0000 (Coordinated Universal Time)', 28 * MIN],
  ])('%s is honoured (as Date.parse read it)', (header, wait) => {
    expect(Date.parse(header) - NOW.getTime()).toBe(wait);
    expect(retryAfterMs(header, NOW)).toBe(wait);
  });

  it.each([
    'Wed, 21 Oct 2026 07:28', // no zone
    'Wed, 21 Oct 2026 07:28 (UTC)', // a comment is no zone
    'Wed, 21 Oct 2026 07:28:00 +0000 (UTC',
    'Wed, 21 Oct 2026 7:28 GMT',
    'Wed, 21 Oct 2026 24:00 GMT',
  ])('%s is still no Retry-After', (header) => {
    expect(retryAfterMs(header, NOW)).toBeUndefined();
  });
});
