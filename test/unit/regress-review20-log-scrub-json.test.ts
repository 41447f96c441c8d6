import fc from 'fast-check';
import { logRef, scrubLogLine } from '../../src/observability/logging';

// Regression review 20 of d72e079: scrubLogLine runs on every serialized log line (pino hooks.streamWrite). It must
// leave every line the same JSON whatever the values hold (escapes, quotes, a '+' in a URL or a base64 secret, numbers
// in exponent form), leave lines with nothing to scrub byte for byte alone, and keep a stack's line numbers.

const piece = fc.constantFrom('wamid.', 'wamid.HBgLMTY1MDUwNzY1MjAV+/=', '+', '+5491112345678', '+1234567', 'msgapp-123-', '5491112345678', '"', '\\', '\n', '\u2028', 'é', '/', '=', 'e+21', ':', '{', '}');
const text = fc.array(fc.oneof(piece, fc.string({ maxLength: 6 })), { maxLength: 12 }).map((a) => a.join(''));
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, text, fc.double(), fc.integer(), fc.boolean(), fc.constant(null), fc.array(tie('v'), { maxLength: 4 }), fc.dictionary(text, tie('v'), { maxKeys: 4 })),
})).v;

describe('regression review 20: scrubLogLine keeps every line JSON', () => {
  it('parses after scrubbing whatever the values hold; no +number, no provider id and no conversation number stays', () => {
    fc.assert(
      fc.property(fc.dictionary(text, value, { maxKeys: 6 }), text, (fields, msg) => {
        const line = JSON.stringify({ level: 30, time: 1795876842528, ...fields, msg });
        const out = scrubLogLine(line);
        expect(() => JSON.parse(out)).not.toThrow();
        expect(out).not.toMatch(/(?<![A-Za-z_])\+[0-9]{7,}(?![A-Za-z0-9_])|wamid\.[A-Za-z0-9_+/=-]|msgapp-[0-9]+-[0-9]{7,}/);
      }),
      { numRuns: 3000 },
    );
  });

  it('leaves a line with nothing to scrub as it was (numbers, offsets, a stack with its line numbers)', () => {
    const line = JSON.stringify({
      level: 50, time: 1795876842528, n: 1e21, small: -1234567, at: '2026-11-28T14:00:00+01:00',
      err: { message: 'x', stack: 'Error: x\n    at f (/app/dist/commands/send/keyed.js:1234:56)' }, msg: 'failed',
    });
    expect(scrubLogLine(line)).toBe(line);
  });

  it('writes a provider id as its logRef, findable from the id', () => {
    const id = 'wamid.HBgLMTY1MDUwNzY1MjAVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3RTcA';
    expect(JSON.parse(scrubLogLine(JSON.stringify({ msg: `refused "${id}"` }))).msg).toBe(`refused "${logRef(id)}"`);
  });
});
