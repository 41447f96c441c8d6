import { RateLimitCounter } from '../../src/http/rate-limit-store';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Clocks of several processes (docs/reliability.md, 2026-11-28): the rate limit's shared counts are deleted once
// their window ended more than a window ago. A process whose clock ran more than a window ahead deleted the current
// window of the processes on time: their counts of that minute started again from zero (a key got up to one more limit
// per process and cleanup). A window is now deleted once both the deleting process's clock and Postgres's say so.

const WINDOW = 60_000;

describe('clock skew: rate-limit windows across processes', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  const counter = (now: () => number) =>
    new RateLimitCounter(db.pool, { windowMs: WINDOW, syncMs: 1_000_000, limitsRefreshMs: 1_000_000, now, onError: () => undefined });

  it("a process 150 s ahead does not delete the window the others count in; its cleanup still deletes windows long over", async () => {
    const t0 = Date.now(); // the on-time process stays in the minute of t0
    const onTime = counter(() => t0);
    const ahead = counter(() => Date.now() + 150_000);
    for (let i = 0; i < 3; i++) onTime.incr('key-1');
    await onTime.sync();
    const old = Date.now() - 10 * WINDOW;
    await db.pool.query('INSERT INTO public.rate_limit_windows (key, window_start, expires_at, count) VALUES ($1, $2, $3, 5)', ['key-1', old, old + WINDOW]);
    await ahead.sync(); // its first sync cleans up
    const rows = await db.pool.query('SELECT window_start FROM public.rate_limit_windows WHERE key = $1', ['key-1']);
    expect(rows.rows.map((r) => Number(r.window_start))).not.toContain(old);
    expect(rows.rowCount).toBe(1);
    onTime.incr('key-1');
    await onTime.sync();
    // its minute still holds the three before
    expect(onTime.used('key-1')).toBe(4);
  });
});
