import { deduplicate } from '../../src/commands/bulk/input';
import { normalizePhone } from '../../src/shared/phone';

// Review 10 of 01ab2d1 / 4fcd9c4 (the bulk deduplication normalizes every phone). Found sound: these tests pass.
// Every pair the old rule merged (same text; or same spelling key and equal E.164) is still merged, since both give one
// normalized key; the first occurrence (spelling and variables) is kept; phones that do not normalize are kept by text
// and cannot meet a normalized key (normalizePhone is idempotent: a normalized form normalizes to itself).

const r = (phone: string, name = phone) => ({ phone, variables: { name }, buttonVariables: {} });

describe('review 10: bulk deduplication by normalized phone', () => {
  it('keeps the first spelling and its variables', () => {
    const d = deduplicate([r('+54111555551234', 'first'), r('+5491155551234', 'second'), r('+541155551234', 'third')]);
    expect(d).toEqual({ recipients: [r('+54111555551234', 'first')], total: 3, unique: 1 });
  });

  it('phones that do not normalize are kept by their text (repeats removed, different ones kept)', () => {
    expect(normalizePhone('+999123456')).toBeNull();
    const d = deduplicate([r('+999123456'), r('+999123456'), r('+999123457'), r('+39612345678'), r('+390612345678')]);
    expect(d.recipients.map((x) => x.phone)).toEqual(['+999123456', '+999123457', '+39612345678', '+390612345678']);
  });

  it('look-alike but different numbers stay apart (Italy\'s leading 0, other area codes, other countries)', () => {
    const list = ['+390612345678', '+3903123456789', '+5491155551234', '+5492215551234', '+14155550123', '+447911123456', '+525512345678', '+5511987654321'];
    expect(deduplicate(list.map((p) => r(p))).unique).toBe(list.length);
  });

  it('a normalized form normalizes to itself (so a text key never meets a normalized one)', () => {
    const samples: string[] = [];
    for (let i = 0; i < 3000; i++) {
      const cc = ['54', '549', '52', '521', '1', '44', '440', '39', '7', '78', '49', '33', '55', '86', '353'][i % 15];
      samples.push(`+${cc}${String(1_000_000_000 + ((i * 7_919_731) % 8_999_999_999)).slice(0, 10 - (cc.length - 1))}`);
    }
    const bad = samples.map((p) => normalizePhone(p)).filter((e): e is string => e !== null).filter((e) => normalizePhone(e) !== e);
    expect(bad).toEqual([]);
  });
});
