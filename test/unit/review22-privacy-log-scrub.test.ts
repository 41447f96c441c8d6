import pino from 'pino';
import { Writable } from 'node:stream';
import { createProcessLogger, scrubLogLine } from '../../src/observability/logging';

// Review 22 (docs/privacy.md, "Logs"): the scrubber masked `+` and 7 digits inside words that are no phone (an
// Idempotency-Key `order+1234567` became `order+[phone]`) and let through numbers written with spaces, dashes, dots or
// a parenthesized group (`+49 151 2345 6789`, `+1-202-555-0123`): customers' numbers in clear in the logs.

const scrubbed = (text: string): string => JSON.parse(scrubLogLine(JSON.stringify({ level: 40, msg: text }))).msg;

describe('review 22: the log scrubber masks phone numbers, and only them', () => {
  it.each([
    ['upsert of +49 151 2345 6789: gave up', 'upsert of +[phone]: gave up'],
    ['recipient +1-202-555-0123 refused', 'recipient +[phone] refused'],
    ['recipient +1.202.555.0123 refused', 'recipient +[phone] refused'],
    ['call +54 (9) 11 5555-0001.', 'call +[phone].'],
    ['call +44 (0)20 7946 0958', 'call +[phone]'],
    ['phone=+34 612 34 56 78&x', 'phone=+[phone]&x'],
    ['+49 151 2345 6789 2nd attempt', '+[phone] 2nd attempt'],
    ['+5491155550166 2nd attempt', '+[phone] 2nd attempt'],
    ['contactphone-301-+5491155550166', 'contactphone-301-+[phone]'],
    ['(+5491155550166)', '(+[phone])'],
    ['first line\n+5491155550166 on the next', 'first line\n+[phone] on the next'],
    ['a control\u0001+5491155550166', 'a control\u0001+[phone]'],
    ['+1234567', '+[phone]'],
    ['ids 301+5491155550166', 'ids 301+[phone]'],
  ])('masks %j', (text, expected) => {
    expect(scrubbed(text)).toBe(expected);
  });

  it.each([
    'Idempotency-Key order+1234567 replayed',
    'base64 ab+1234567Cd/x=',
    'e+21 and 1e+2100000000',
    'at 2026-11-28T14:00:00+01:00',
    'a delta of +1 2026-11-28',
    '+123456 (six digits)',
  ])('leaves %j as it is', (text) => {
    expect(scrubbed(text)).toBe(text);
  });

  it('a line the process logger writes: the spaced number masked, the key with + and digits kept', () => {
    const lines: string[] = [];
    const out = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const logger = createProcessLogger('info', out as unknown as pino.DestinationStream);
    logger.warn({ idempotencyKey: 'order+7654321', recipient: '+49 151 2345 6789' }, 'send to +1-202-555-0123 refused');
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]);
    expect(line).toMatchObject({ idempotencyKey: 'order+7654321', recipient: '+[phone]', msg: 'send to +[phone] refused' });
    for (const part of ['151 2345 6789', '202-555-0123']) expect(lines[0]).not.toContain(part);
  });
});
