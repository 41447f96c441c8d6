import { DLQ_REASON_MAX, shortenReason } from '../../src/ports/transport';

// A dead letter's reason may quote the record (`unknown record kind "<500 KB>"`): the DLQ header, the log line and
// onDeadLetter get it cut to DLQ_REASON_MAX characters, saying how much was cut.
describe('dead-letter reason', () => {
  it('keeps a reason up to the limit as it is', () => {
    expect(shortenReason('unknown record kind "small"')).toBe('unknown record kind "small"');
    expect(shortenReason('r'.repeat(DLQ_REASON_MAX))).toBe('r'.repeat(DLQ_REASON_MAX));
  });

  it('cuts a longer one and says how many characters were cut', () => {
    const reason = `unknown record kind "${'k'.repeat(500_000)}"`;
    const shown = shortenReason(reason);
    expect(shown).toBe(`${reason.slice(0, DLQ_REASON_MAX)}… (${reason.length - DLQ_REASON_MAX} more characters)`);
    expect(shown.length).toBeLessThan(DLQ_REASON_MAX + 40);
  });
});
