import type { Pool, QueryResultRow } from 'pg';
import { listCompanyRateLimits } from '../projections/ratelimits/queries';
import { oneAtATime } from '../shared/one-at-a-time';
import { timedQuery } from '../shared/timed-query';

// Request counts per API key in fixed windows aligned to the epoch (so every process agrees where a window
// starts), counted in memory and synchronised with Postgres every `syncMs`: one statement adds this process's
// increments of every key to rate_limit_windows and reads back the global counts. A request never waits for the
// database; processes see each other's requests one sync late (docs/rate-limits.md, "Overshoot").

export interface WindowCount {
  /** requests of the key in the current window, this process's unsynced ones included */
  current: number;
  /** milliseconds until the window ends */
  ttl: number;
}

export interface RateLimitCounterOptions {
  windowMs: number;
  syncMs: number;
  /** how often the per-company limits are re-read */
  limitsRefreshMs: number;
  now: () => number;
  onError: (err: unknown, what: string) => void;
  /** how long one of the counter's statements may go unanswered before it counts as failed (default 10 s) */
  queryTimeoutMs?: number;
}

/**
 * A statement of the counter unanswered this long has failed (its increments stay pending). Without it a sync whose
 * connection went silent (a half-open TCP connection: failover, a dropped NAT entry) waited for the kernel to give up
 * on it, about 15 minutes, and every sync after it waited behind it: no process saw another's requests, and the
 * app's close (which flushes the last counts) hung (found in review; test/integration/review-ratelimit-store.test.ts).
 */
export const RATE_LIMIT_QUERY_TIMEOUT_MS = 10_000;
/** The sync's server-side statement timeout, as a share of the query timeout: Postgres cancels it first. */
const SERVER_SHARE_OF_TIMEOUT = 0.8;

interface Entry {
  windowStart: number;
  /** increments not yet added to the table */
  pending: number;
  /** increments being added by the sync in flight */
  inFlight: number;
  /** the key's global count at the last sync (this process's synced increments included) */
  synced: number;
}

const CLEANUP_EVERY_MS = 60_000;

/** A key's requests in its window: every process's synced ones, and this process's being synced and not yet synced. */
const countOf = (entry: Entry): number => entry.synced + entry.inFlight + entry.pending;

// Adds the keys' increments and returns their global counts; keys without increments are only read back.
// The rows are written in (key, window) order, so every process locks them in the same order: in each process's
// own order (the order its map met the keys) two processes syncing the same keys at once deadlocked, and one of
// them lost that sync (found in review; test/integration/review-ratelimit-store.test.ts).
const SYNC = `
  WITH input AS (SELECT k, s, c FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS t(k, s, c)),
  added AS (
    INSERT INTO public.rate_limit_windows AS w (key, window_start, expires_at, count)
    SELECT k, s, s + $4::bigint, c FROM input WHERE c > 0 ORDER BY k, s
    ON CONFLICT (key, window_start) DO UPDATE SET count = w.count + EXCLUDED.count
    RETURNING key, window_start, count)
  SELECT key, window_start, count FROM added
  UNION ALL
  SELECT w.key, w.window_start, w.count FROM public.rate_limit_windows w JOIN input ON w.key = input.k AND w.window_start = input.s
  WHERE input.c = 0`;

export class RateLimitCounter {
  private readonly entries = new Map<string, Entry>();
  private limits = new Map<number, number>();
  private timers: NodeJS.Timeout[] = [];
  private lastCleanup = 0;

  constructor(private readonly pool: Pool, readonly options: RateLimitCounterOptions) {}

  /** Loads the per-company limits, then syncs and refreshes them periodically. */
  async start(): Promise<void> {
    await this.refreshLimits();
    this.lastCleanup = this.options.now();
    const every = (ms: number, fn: () => Promise<void>) => {
      const t = setInterval(() => void fn(), ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.options.syncMs, () => this.sync());
    every(this.options.limitsRefreshMs, () => this.refreshLimits());
  }

  /** Stops the timers and flushes this process's last increments. */
  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.sync();
  }

  /** Counts one request of `key`. */
  incr(key: string): WindowCount {
    const now = this.options.now();
    const windowStart = this.windowStartAt(now);
    let entry = this.entries.get(key);
    if (entry === undefined || entry.windowStart !== windowStart) {
      entry = { windowStart, pending: 0, inFlight: 0, synced: 0 };
      this.entries.set(key, entry);
    }
    entry.pending++;
    return { current: countOf(entry), ttl: windowStart + this.options.windowMs - now };
  }

  /** Requests of `key` counted in the current window so far (this process's unsynced ones included); not one more. */
  used(key: string): number {
    const entry = this.entries.get(key);
    return entry !== undefined && entry.windowStart === this.windowStartAt(this.options.now()) ? countOf(entry) : 0;
  }

  /** Windows are aligned to the epoch, so every process agrees where one starts. */
  private windowStartAt(now: number): number {
    return now - (now % this.options.windowMs);
  }

  /** The operator-set limit of a company, if any (as last refreshed). */
  companyLimit(companyId: number): number | undefined {
    return this.limits.get(companyId);
  }

  /**
   * Re-reads the per-company limits; one read at a time. A call during a read in flight gets the next one (shared by
   * every such call), so the limits kept are never older than the call: two reads at once (the periodic one and the
   * one after this process's projection runner applied a new limit) could finish in either order, and the older
   * answer, kept last, undid the new limit until the next periodic read (found in review).
   */
  readonly refreshLimits = oneAtATime(() => this.refreshOnce());

  private async refreshOnce(): Promise<void> {
    try {
      const limits = await listCompanyRateLimits(this.pool, { queryTimeoutMs: this.queryTimeoutMs });
      this.limits = new Map(limits.map((l) => [l.companyId, l.perMinute]));
    } catch (err) {
      this.options.onError(err, 'reading the per-company rate limits');
    }
  }

  /** One statement, failed when unanswered for the query timeout (the connection is then dropped by the pool). */
  private query<R extends QueryResultRow>(text: string, values: unknown[]) {
    return this.pool.query<R>(timedQuery(text, this.queryTimeoutMs, values));
  }

  private get queryTimeoutMs(): number {
    return this.options.queryTimeoutMs ?? RATE_LIMIT_QUERY_TIMEOUT_MS;
  }

  /**
   * The sync's statement, which Postgres itself cancels (and rolls back) before this process gives up on it: a sync
   * the counter gave up on must not be applied later, when its increments are already pending again. With only the
   * client's timeout, a sync stalled in Postgres (waiting for a row another statement held, a stalled server) was
   * applied once the stall ended, as was every sync retried meanwhile: one request counted 4 times after three
   * timed-out syncs (regression review 12; test/integration/regress-review12-ratelimit-sync.test.ts). Only a sync
   * whose answer was lost on the way (a connection gone silent) can still count twice. Any failure drops the
   * connection (its transaction with it), as the pool's own `query` does.
   */
  private async syncStatement(values: unknown[]) {
    const serverMs = Math.max(1, Math.floor(this.queryTimeoutMs * SERVER_SHARE_OF_TIMEOUT));
    const client = await this.pool.connect();
    let failed = false;
    try {
      await client.query(timedQuery(`BEGIN; SET LOCAL statement_timeout = ${serverMs}`, this.queryTimeoutMs));
      const result = await client.query<{ key: string; window_start: string; count: string }>(timedQuery(SYNC, this.queryTimeoutMs, values));
      await client.query(timedQuery('COMMIT', this.queryTimeoutMs));
      return result;
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      client.release(failed);
    }
  }

  /**
   * Adds the increments counted so far to the shared counts and reads those back; one sync at a time. A sync in
   * flight took its snapshot before this call, so a call during it gets the next one (shared by every such call).
   */
  readonly sync = oneAtATime(() => this.syncOnce());

  private async syncOnce(): Promise<void> {
    const now = this.options.now();
    const batch: Array<[string, Entry]> = [];
    for (const [key, entry] of this.entries) {
      if (entry.pending === 0 && entry.windowStart + this.options.windowMs <= now) {
        this.entries.delete(key);
        continue;
      }
      batch.push([key, entry]);
      entry.inFlight = entry.pending;
      entry.pending = 0;
    }
    if (batch.length > 0) {
      try {
        const { rows } = await this.syncStatement([
          batch.map(([k]) => k), batch.map(([, e]) => e.windowStart), batch.map(([, e]) => e.inFlight), this.options.windowMs,
        ]);
        for (const row of rows) {
          const entry = this.entries.get(row.key);
          if (entry !== undefined && entry.windowStart === Number(row.window_start)) entry.synced = Number(row.count);
        }
        for (const [, entry] of batch) entry.inFlight = 0;
      } catch (err) {
        for (const [, entry] of batch) {
          entry.pending += entry.inFlight; // added at the next sync
          entry.inFlight = 0;
        }
        this.options.onError(err, 'synchronising the rate-limit counts');
      }
    }
    if (now - this.lastCleanup >= CLEANUP_EVERY_MS) {
      this.lastCleanup = now;
      // over by both this process's clock and Postgres's: a process whose clock runs ahead by more than a window does not
      // delete the windows the others still count in (docs/reliability.md, "Clocks of several processes")
      await this
        .query(
          'DELETE FROM public.rate_limit_windows WHERE expires_at < $1 AND expires_at < (extract(epoch FROM now()) * 1000)::bigint - $2',
          [now - this.options.windowMs, this.options.windowMs],
        )
        .catch((err) => this.options.onError(err, 'deleting old rate-limit windows'));
    }
  }
}

/** The @fastify/rate-limit store over a counter (the plugin constructs it; `child` shares the counter). */
export function storeOf(counter: RateLimitCounter) {
  return class PostgresSyncedStore {
    incr(key: string, callback: (error: Error | null, result?: WindowCount) => void): void {
      callback(null, counter.incr(key));
    }

    child(): PostgresSyncedStore {
      return this;
    }
  };
}
