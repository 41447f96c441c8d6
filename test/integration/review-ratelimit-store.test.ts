import { createServer, connect, type Server, type Socket } from 'node:net';
import type { PoolClient } from 'pg';
import { createPool } from '../../src/adapters/postgres/pool';
import { RateLimitCounter } from '../../src/http/rate-limit-store';
import { blackholeProxyFor } from '../support/blackhole-proxy';
import { createTestDatabase, type TestDatabase } from '../support/db';

/** A TCP proxy to Postgres whose answers on a connection can be held back (kept, not dropped) and let through later. */
class HoldingProxy {
  readonly connections: Array<{ held: Buffer[] | null; release(): void }> = [];
  private server!: Server;
  port = 0;

  async start(url: string): Promise<string> {
    const target = new URL(url);
    this.server = createServer((client: Socket) => {
      const server = connect(Number(target.port || 5432), target.hostname);
      const c = {
        held: null as Buffer[] | null,
        release() {
          const held = c.held ?? [];
          c.held = null;
          for (const d of held) client.write(d);
        },
      };
      this.connections.push(c);
      client.on('data', (d) => server.write(d));
      server.on('data', (d) => (c.held ? c.held.push(d) : client.write(d)));
      const end = () => {
        client.destroy();
        server.destroy();
      };
      client.on('error', end).on('close', end);
      server.on('error', end).on('close', end);
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as { port: number }).port;
    const via = new URL(url);
    via.hostname = '127.0.0.1';
    via.port = String(this.port);
    return via.toString();
  }

  async stop(): Promise<void> {
    await new Promise((r) => this.server.close(r));
  }
}

/** The held bytes end with ReadyForQuery ('Z', length 5, status): the statement's whole answer is held. */
const heldAnswer = (held: Buffer[] | null) => {
  const all = Buffer.concat(held ?? []);
  return all.length >= 6 && all[all.length - 6] === 0x5a && all.readInt32BE(all.length - 5) === 5;
};

// Review of the shared rate-limit counter (docs/rate-limits.md) on real Postgres: several counters on one database
// stand for several serve processes; the clock is injected, syncs are called by hand.

const WINDOW = 60_000;
const T0 = Date.parse('2026-03-01T10:00:00.000Z');

describe('RateLimitCounter under concurrency and database faults (review)', () => {
  let db: TestDatabase;
  let clock: number;
  const errors: Array<{ what: string; message: string }> = [];
  const counter = (pool = db.pool, extra: Partial<ConstructorParameters<typeof RateLimitCounter>[1]> = {}) =>
    new RateLimitCounter(pool, {
      windowMs: WINDOW, syncMs: 1_000_000, limitsRefreshMs: 1_000_000, now: () => clock,
      onError: (e, what) => errors.push({ what, message: (e as Error).message }), ...extra,
    });
  const rows = async () =>
    (await db.pool.query('SELECT key, count FROM public.rate_limit_windows ORDER BY key, window_start')).rows
      .map((r) => ({ key: r.key as string, count: Number(r.count) }));
  /** Waits until `n` statements of this database wait for a lock (no time limit: jest's timeout is the only one). */
  const lockWaiters = async (n: number) => {
    for (;;) {
      const { rows: [r] } = await db.pool.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      if (r.n >= n) return;
      await new Promise((res) => setTimeout(res, 10));
    }
  };

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

  it('two processes syncing the same keys at once never deadlock (their rows are locked in one order)', async () => {
    const a = counter();
    const b = counter();
    // each process met the keys in its own order (its map's order is the order of its statement's rows)
    for (const k of ['k1', 'k2']) a.incr(k);
    for (const k of ['k2', 'k1']) b.incr(k);
    await a.sync();
    await b.sync();
    for (const k of ['k1', 'k2']) a.incr(k);
    for (const k of ['k2', 'k1']) b.incr(k);
    // another process's statement holds k2's row for a moment, while b and then a come to it
    const holder: PoolClient = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT * FROM public.rate_limit_windows WHERE key = 'k2' FOR UPDATE");
      const bSynced = b.sync();
      await lockWaiters(1);
      const aSynced = a.sync();
      await lockWaiters(2);
      await holder.query('COMMIT');
      await Promise.all([aSynced, bSynced]);
    } finally {
      holder.release();
    }
    expect(errors).toEqual([]);
    expect(await rows()).toEqual([{ key: 'k1', count: 4 }, { key: 'k2', count: 4 }]);
  });

  it('a sync whose connection went silent fails after the query timeout, keeps its increments, and the next one adds them', async () => {
    const { proxy, url } = await blackholeProxyFor(db.url);
    const pool = createPool(url, 2);
    try {
      const a = counter(pool, { queryTimeoutMs: 300 });
      a.incr('k1');
      await a.sync(); // its connection stays idle in the pool
      a.incr('k1');
      for (const c of proxy.connections) c.frozen = true; // half-open: bytes go nowhere, nothing is closed
      await a.sync(); // before the fix: never answered, and every sync after it waited behind it
      expect(errors).toEqual([{ what: 'synchronising the rate-limit counts', message: 'Query read timeout' }]);
      expect(a.incr('k1')).toEqual({ current: 3, ttl: 45_000 }); // counted locally meanwhile
      await a.stop(); // a new connection: flushes the 2 kept and the 1 since
      expect(await rows()).toEqual([{ key: 'k1', count: 3 }]);
    } finally {
      await pool.end();
      await proxy.stop();
    }
  });

  it('a limit read that started before a new limit was applied never undoes it by finishing after the read that shows it', async () => {
    await db.pool.query(`CREATE SCHEMA IF NOT EXISTS rm_ratelimits;
      CREATE TABLE IF NOT EXISTS rm_ratelimits.company_limits (company_id integer PRIMARY KEY, per_minute integer NOT NULL, set_at timestamptz NOT NULL);
      TRUNCATE rm_ratelimits.company_limits`);
    const proxy = new HoldingProxy();
    const pool = createPool(await proxy.start(db.url), 2);
    try {
      const a = counter(pool);
      await a.refreshLimits(); // its connection stays idle in the pool
      expect(a.companyLimit(7)).toBeUndefined();
      // the periodic read: answered (no limit yet), the answer still on its way
      const [first] = proxy.connections;
      first.held = [];
      const periodic = a.refreshLimits();
      while (!heldAnswer(first.held)) await new Promise((r) => setTimeout(r, 5));
      // the operator's limit is applied, and this process's runner asks for a read
      await db.pool.query("INSERT INTO rm_ratelimits.company_limits VALUES (7, 5, now())");
      const afterApplied = a.refreshLimits();
      // before the fix that read ran at once on a second connection and finished first; now it waits for the first
      if (pool.totalCount > 1) await afterApplied;
      first.release();
      await Promise.all([periodic, afterApplied]);
      expect(a.companyLimit(7)).toBe(5);
      expect(errors).toEqual([]);
    } finally {
      await pool.end();
      await proxy.stop();
    }
  });
});
