// Regression review 23b of fcbae79: the log scrubber asked libphonenumber-js (20-90 µs a call) once per separated
// candidate, so a crafted value of many (`+1 234 5678 ` repeated, 12 KB) cost about 120 ms of the logger's thread per
// line. A line's calls are now bounded; the further candidates of 7 digits or more are masked without asking. And a
// candidate of more digits than any number (`+1 2 2 2 …`, 10 KB) is no longer parsed whole by the library (0.75 ms).
// The library (not our code) is wrapped only to count its calls; it answers as it does.
const calls = { n: 0 };
jest.mock('libphonenumber-js/max', () => {
  const actual = jest.requireActual('libphonenumber-js/max');
  return { ...actual, isPossiblePhoneNumber: (...args: unknown[]) => { calls.n++; return actual.isPossiblePhoneNumber(...args); } };
});

import { PHONE_REDACTED, scrubLogLine } from '../../src/observability/logging';

describe('regression review 23b: the log scrubber bounds its phone-number checks per line', () => {
  beforeEach(() => { calls.n = 0; });

  it('a line of 1,000 separated candidates asks libphonenumber-js a bounded number of times', () => {
    const line = JSON.stringify({ msg: 'x', url: `/${'+1 234 5678 '.repeat(1000)}` });
    const out = scrubLogLine(line);
    expect(calls.n).toBeLessThanOrEqual(8);
    expect(JSON.parse(out).msg).toBe('x'); // still the same JSON
  });

  it('the candidates past the bound are masked (the safe side), each one', () => {
    const line = JSON.stringify({ v: '+49 151 2345 6789, '.repeat(50) });
    const out = JSON.parse(scrubLogLine(line)).v as string;
    expect(out).toBe(`${PHONE_REDACTED}, `.repeat(50));
    expect(out).not.toMatch(/[0-9]/);
  });

  it('a line with a few numbers is judged as before: a date after +1 is no number, a real one is masked', () => {
    const out = scrubLogLine(JSON.stringify({ a: 'due +1 2026-11-28', b: 'call +49 151 2345 6789 now' }));
    expect(JSON.parse(out)).toEqual({ a: 'due +1 2026-11-28', b: `call ${PHONE_REDACTED} now` });
    expect(calls.n).toBeGreaterThan(0);
  });

  it('a candidate of more digits than any number (a run of digits and spaces) is not asked about, and judged as before', () => {
    const line = JSON.stringify({ v: `+1 ${'2 '.repeat(5000)}end`, w: `+5491155550166 ${'3 '.repeat(30)}` });
    const out = JSON.parse(scrubLogLine(line));
    expect(calls.n).toBe(0);
    expect(out.v).toBe(`+1 ${'2 '.repeat(5000)}end`); // its leading `+1`: too short to be a number
    expect(out.w).toBe(`${PHONE_REDACTED} ${'3 '.repeat(30)}`); // its leading 13 digits: one
  });

  it('the bound is per line: a following line is judged again', () => {
    scrubLogLine(JSON.stringify({ v: '+1 234 5678 '.repeat(100) }));
    const out = scrubLogLine(JSON.stringify({ a: 'due +1 2026-11-28' }));
    expect(JSON.parse(out)).toEqual({ a: 'due +1 2026-11-28' });
  });
});
