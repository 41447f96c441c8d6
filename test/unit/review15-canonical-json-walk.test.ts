import fc from 'fast-check';
import { canonicalJson, canonicalJsonInTurns, canonicalJsonIterative } from '../../src/shared/canonical-json';
import { Turns } from '../../src/shared/turns';

// Review 15: canonicalJsonIterative and canonicalJsonInTurns now share one walk (src/shared/canonical-json.ts,
// CanonicalWalk), so canonicalJsonIterative is no longer the first version's code. The first version is kept here,
// verbatim (git show 105f62a:src/shared/canonical-json.ts), as the reference all three writers must equal: the text is
// part of every stored Idempotency-Key fingerprint.

function firstVersion(value: unknown): string {
  const out: string[] = [];
  const work: Array<{ value: unknown } | string> = [{ value }]; // a value to write, or text to emit as is
  while (work.length > 0) {
    const next = work.pop()!;
    if (typeof next === 'string') {
      out.push(next);
      continue;
    }
    const v = next.value;
    if (Array.isArray(v)) {
      work.push(']');
      for (let i = v.length - 1; i >= 0; i--) {
        work.push({ value: v[i] ?? null });
        if (i > 0) work.push(',');
      }
      work.push('[');
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v as Record<string, unknown>).filter(([, e]) => e !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      work.push('}');
      for (let i = entries.length - 1; i >= 0; i--) {
        work.push({ value: entries[i][1] }, `${JSON.stringify(entries[i][0])}:`);
        if (i > 0) work.push(',');
      }
      work.push('{');
    } else {
      out.push(JSON.stringify(v ?? null));
    }
  }
  return out.join('');
}

/** ends the slice after every item: the walk stops and goes on after each one */
class EveryItem extends Turns {
  override due(): boolean {
    return true;
  }
}

async function inTurns(value: unknown, turns: Turns): Promise<{ text: string; pieces: string[] }> {
  const pieces: string[] = [];
  await canonicalJsonInTurns(value, (t) => pieces.push(t), turns);
  return { text: pieces.join(''), pieces };
}

const jsonish = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(null, undefined, true, false, 0, -0, 1e21, 5e-324, NaN, Infinity, '\ud800', 'a\udc00b', '\u0000', () => 1, Symbol('s')),
    fc.double(), fc.integer(), fc.string({ unit: 'binary' }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), tie('value'), { maxKeys: 6 }),
  ),
})).value;

describe('review15: one walk for the iterative and the in-turns writers, the first version\'s text', () => {
  it('random JSON-like values: recursive, iterative and in turns (stopping after every item) equal the first version', async () => {
    await fc.assert(fc.asyncProperty(jsonish, async (value) => {
      const reference = firstVersion(value);
      expect(canonicalJsonIterative(value)).toBe(reference);
      expect(canonicalJson(value)).toBe(reference);
      expect((await inTurns(value, new EveryItem())).text).toBe(reference);
    }), { numRuns: 2000 });
  });

  it('nested thousands of levels deep, and a large body handed over in pieces of whole tokens: the first version\'s text', async () => {
    const deep = JSON.parse('['.repeat(5000) + '{"b":[1,{"d":2,"c":"\\ud83d\\ude00"}]}' + ']'.repeat(5000));
    expect(canonicalJson(deep)).toBe(firstVersion(deep));
    expect(canonicalJsonIterative(deep)).toBe(firstVersion(deep));
    expect((await inTurns(deep, new Turns())).text).toBe(firstVersion(deep));
    const bulk = { recipients: Array.from({ length: 5000 }, (_, i) => ({ phone: `+54911${10000000 + i}`, variables: { name: `Cliente ${i} \ud83d\ude00`, u: undefined } })) };
    const turns = new Turns();
    const { text, pieces } = await inTurns(bulk, turns);
    expect(text).toBe(firstVersion(bulk));
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.every((p) => !/[\ud800-\udbff]$/.test(p))).toBe(true);
    expect(turns.yields).toBeGreaterThan(0);
  });
});
