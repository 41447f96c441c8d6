import fc from 'fast-check';
import type { Pool } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { type Position, START } from '../../src/ports/event-store';

// comparePositions only parses its arguments: no database behind this store.
const store = new PostgresEventStore({} as Pool);
const position = (tx: bigint, seq: bigint) => `${tx}:${seq}` as Position;
const sign = (n: number) => Math.sign(n);

describe('Postgres event store positions', () => {
  it('orders by transaction id, then sequence, as numbers (not as text)', () => {
    expect(store.comparePositions(position(9n, 1n), position(10n, 0n))).toBe(-1);
    expect(store.comparePositions(position(10n, 10n), position(10n, 9n))).toBe(1);
    expect(store.comparePositions(position(10n, 9n), position(10n, 9n))).toBe(0);
    expect(store.comparePositions(START, position(0n, 0n))).toBe(-1);
    expect(store.comparePositions(position(0n, 0n), START)).toBe(1);
    expect(store.comparePositions(START, START)).toBe(0);
  });

  it('agrees with comparing the numbers as bigints', () => {
    const part = fc.bigInt({ min: 0n, max: 2n ** 63n - 1n });
    fc.assert(
      fc.property(part, part, part, part, (t1, s1, t2, s2) => {
        const expected = t1 !== t2 ? (t1 < t2 ? -1 : 1) : s1 === s2 ? 0 : s1 < s2 ? -1 : 1;
        expect(sign(store.comparePositions(position(t1, s1), position(t2, s2)))).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses what is not a position', () => {
    for (const bad of ['1', '1:', ':1', '01:2', '1:02', '-1:2', '1:2:3', 'a:b']) {
      expect(() => store.comparePositions(bad as Position, position(1n, 1n))).toThrow(/invalid position/);
      expect(() => store.comparePositions(position(1n, 1n), bad as Position)).toThrow(/invalid position/);
    }
  });
});
