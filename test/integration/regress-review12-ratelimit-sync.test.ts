import type { PoolClient } from 'pg';
import { RateLimitCounter } from '../../src/http/rate-limit-store';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Regression review 12 of 90edd2b (the rate-limit counter's statements time out after RATE_LIMIT_QUERY_TIMEOUT_MS):
// on real Postgres, several counters stand for several processes; the clock is injected, syncs are called by hand.

const WINDOW = 60_000;
const T0 = Date.parse('2026-03-01T10:00:00.000Z');

describe('regress review 12: the rate-limit sync timeout (90edd2b)', () => {
  let db: TestDatabase;
  const clock = T0 + 15_000;
  const errors: Array<{ what: string; message: string }> = [];
  const counter = (queryTimeoutMs?: number) =>
    new RateLimitCounter(db.pool, {
      windowMs: WINDOW, syncMs: 1_000_000, limitsRefreshMs: 1_000_000, now: () => clock, queryTimeoutMs,
      onError: (e, what) => errors.push({ what, message: (e as Error).message }),
    });
  const count = async (key: string) =>
    Number((await db.pool.query('SELECT coalesce(sum(count), 0) AS n FROM public.rate_limit_windows WHERE key = $1', [key])).rows[0].n);
  const lockWaiters = async () =>
    (await db.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).rows[0].n as number;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 10 });
  });
  afterAll(async () => {
    await db?.drop();
  });
  beforeEach(async () => {
    await db.pool.query('TRUNCATE public.rate_limit_windows');
    errors.length = 0;
  });

  it('syncs that time out while the rows are held (a stall) leave nothing behind: each request counts once when it ends', async () => {
    const a = counter(300);
    a.incr('k1');
    await a.sync();
    expect(await count('k1')).toBe(1);
    a.incr('k1'); // one more request, to be synced while another statement holds k1's row
    const holder: PoolClient = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT * FROM public.rate_limit_windows WHERE key = 'k1' FOR UPDATE");
      for (let i = 0; i < 3; i++) await a.sync(); // each times out after 300 ms; the increment stays pending
      expect(errors.map((e) => e.what)).toEqual(Array(3).fill('synchronising the rate-limit counts'));
      await holder.query('COMMIT');
    } finally {
      holder.release();
    }
    // statements the counter gave up on and that still wait for the row would be applied now, once each
    while ((await lockWaiters()) > 0) await new Promise((r) => setTimeout(r, 10));
    await a.stop(); // adds the pending increment
    expect(await count('k1')).toBe(2);
  });

  it('in normal operation (no stall) every request counts once, over many syncs of several processes', async () => {
    const processes = [counter(), counter(), counter()];
    let made = 0;
    for (let round = 0; round < 20; round++) {
      await Promise.all(processes.map(async (p, i) => {
        for (let n = 0; n <= i + round % 3; n++) {
          p.incr(`key-${n % 4}`);
          made++;
        }
        await p.sync();
      }));
    }
    for (const p of processes) await p.stop();
    const total = Number((await db.pool.query('SELECT sum(count) AS n FROM public.rate_limit_windows')).rows[0].n);
    expect({ total, errors }).toEqual({ total: made, errors: [] });
  });

  it('limit reads asked for at once all resolve, with a read that began after the last ask', async () => {
    await db.pool.query(`CREATE SCHEMA IF NOT EXISTS rm_ratelimits;
      CREATE TABLE IF NOT EXISTS rm_ratelimits.company_limits (company_id integer PRIMARY KEY, per_minute integer NOT NULL, set_at timestamptz NOT NULL);
      TRUNCATE rm_ratelimits.company_limits`);
    const a = counter();
    const asks: Array<Promise<void>> = [];
    for (let i = 1; i <= 50; i++) {
      await db.pool.query('INSERT INTO rm_ratelimits.company_limits VALUES ($1, $2, now())', [i, i * 10]);
      asks.push(a.refreshLimits());
      if (i % 7 === 0) await asks[asks.length - 1];
    }
    await Promise.all(asks);
    expect(a.companyLimit(50)).toBe(500);
    // a read that fails (the table gone) resolves too, keeps the last limits, and the next one works again
    await db.pool.query('ALTER TABLE rm_ratelimits.company_limits RENAME TO company_limits_away');
    await expect(Promise.all([a.refreshLimits(), a.refreshLimits(), a.refreshLimits()])).resolves.toBeDefined();
    expect(a.companyLimit(50)).toBe(500);
    await db.pool.query('ALTER TABLE rm_ratelimits.company_limits_away RENAME TO company_limits');
    await db.pool.query('UPDATE rm_ratelimits.company_limits SET per_minute = 7 WHERE company_id = 50');
    await a.refreshLimits();
    expect(a.companyLimit(50)).toBe(7);
    expect(errors.every((e) => e.what === 'reading the per-company rate limits')).toBe(true);
  });
});
