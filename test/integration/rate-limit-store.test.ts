import { RateLimitCounter } from '../../src/http/rate-limit-store';
import { createTestDatabase, type TestDatabase } from '../support/db';

// The shared request counter of the rate limits (docs/rate-limits.md) on real Postgres: several counters on one
// database stand for several serve processes; the clock is injected, syncs are called by hand.

const WINDOW = 60_000;
const T0 = Date.parse('2026-03-01T10:00:00.000Z');

describe('RateLimitCounter on Postgres', () => {
  let db: TestDatabase;
  let clock: number;
  const errors: string[] = [];
  const counter = () =>
    new RateLimitCounter(db.pool, { windowMs: WINDOW, syncMs: 1_000_000, limitsRefreshMs: 1_000_000, now: () => clock, onError: (_e, what) => errors.push(what) });
  const rows = async () =>
    (await db.pool.query('SELECT key, window_start, count FROM public.rate_limit_windows ORDER BY key, window_start')).rows
      .map((r) => ({ key: r.key, window: Number(r.window_start) - T0, count: Number(r.count) }));

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  beforeEach(async () => {
    await db.pool.query('TRUNCATE public.rate_limit_windows');
    errors.length = 0;
    clock = T0 + 15_000;
  });

  it('counts locally between syncs and sees every process\'s requests after one', async () => {
    const a = counter();
    const b = counter();
    expect([a.incr('k1'), a.incr('k1'), a.incr('k2')]).toEqual([
      { current: 1, ttl: 45_000 }, { current: 2, ttl: 45_000 }, { current: 1, ttl: 45_000 },
    ]);
    expect(b.incr('k1')).toEqual({ current: 1, ttl: 45_000 }); // b has not seen a's requests yet
    await a.sync();
    await b.sync();
    expect(await rows()).toEqual([{ key: 'k1', window: 0, count: 3 }, { key: 'k2', window: 0, count: 1 }]);
    clock += 5_000;
    expect(b.incr('k1')).toEqual({ current: 4, ttl: 40_000 });
    await a.sync(); // a has nothing to add for k1 but reads its count back
    expect(a.incr('k1')).toEqual({ current: 4, ttl: 40_000 });
    await b.sync();
    await a.sync();
    expect(await rows()).toEqual([{ key: 'k1', window: 0, count: 5 }, { key: 'k2', window: 0, count: 1 }]);
    expect(errors).toEqual([]);
  });

  it('a sync called while another is in flight includes the requests counted after that one began', async () => {
    const a = counter();
    a.incr('k1');
    const first = a.sync(); // its snapshot (1 request) is taken now; its statement is still running
    a.incr('k1');
    await a.sync();
    expect(await rows()).toEqual([{ key: 'k1', window: 0, count: 2 }]);
    await first;
    expect(a.incr('k1')).toEqual({ current: 3, ttl: 45_000 });
    expect(errors).toEqual([]);
  });

  it('together admits at least the limit and at most the limit plus what the other processes admit in two sync intervals', async () => {
    const processes = [counter(), counter(), counter()];
    const max = 100;
    const perInterval = 7; // requests each process receives between two syncs
    let admitted = 0;
    let refusedEverywhere = false;
    for (let tick = 0; tick < 60 && !refusedEverywhere; tick++) {
      let admittedThisTick = 0;
      for (const p of processes) {
        for (let i = 0; i < perInterval; i++) {
          if (p.incr('shared').current <= max) admittedThisTick++;
        }
      }
      admitted += admittedThisTick;
      refusedEverywhere = admittedThisTick === 0;
      for (const p of processes) await p.sync();
      clock += 200;
    }
    expect(refusedEverywhere).toBe(true);
    expect(admitted).toBeGreaterThanOrEqual(max);
    expect(admitted).toBeLessThanOrEqual(max + (processes.length - 1) * 2 * perInterval);
  });

  it('tells how much of the current window a key used (every process\'s after a sync) without counting a request', async () => {
    const a = counter();
    const b = counter();
    expect(a.used('k1')).toBe(0);
    a.incr('k1');
    a.incr('k1');
    expect([a.used('k1'), a.used('k1'), b.used('k1')]).toEqual([2, 2, 0]);
    b.incr('k1');
    await a.sync();
    await b.sync(); // adds its 1 to a's 2
    expect([a.used('k1'), b.used('k1')]).toEqual([2, 3]);
    await a.sync();
    expect(a.used('k1')).toBe(3);
    clock = T0 + WINDOW; // the next window
    expect(a.used('k1')).toBe(0);
  });

  it('starts each window from zero and deletes windows that ended', async () => {
    const a = counter();
    for (let i = 0; i < 3; i++) a.incr('k1');
    await a.sync();
    clock = T0 + WINDOW + 1_000;
    expect(a.incr('k1')).toEqual({ current: 1, ttl: 59_000 });
    await a.sync();
    expect(await rows()).toEqual([{ key: 'k1', window: 0, count: 3 }, { key: 'k1', window: WINDOW, count: 1 }]);
    clock = T0 + 3 * WINDOW; // a minute after the cleanup before, and the first window is over by more than a window
    await a.sync();
    expect(await rows()).toEqual([{ key: 'k1', window: WINDOW, count: 1 }]);
  });

  it('keeps counting locally when the database fails, and adds those requests at the next sync that succeeds', async () => {
    const a = counter();
    a.incr('k1');
    a.incr('k1');
    await db.pool.query('ALTER TABLE public.rate_limit_windows RENAME TO rate_limit_windows_away');
    try {
      await a.sync();
    } finally {
      await db.pool.query('ALTER TABLE public.rate_limit_windows_away RENAME TO rate_limit_windows');
    }
    expect(errors).toEqual(['synchronising the rate-limit counts', 'deleting old rate-limit windows']);
    expect(a.incr('k1')).toEqual({ current: 3, ttl: 45_000 });
    expect(await rows()).toEqual([]);
    await a.sync();
    expect(await rows()).toEqual([{ key: 'k1', window: 0, count: 3 }]);
  });

  it('flushes its last requests when stopped', async () => {
    const a = counter();
    a.incr('k1');
    a.incr('k1');
    await a.stop();
    expect(await rows()).toEqual([{ key: 'k1', window: 0, count: 2 }]);
  });
});
