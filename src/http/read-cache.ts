import type { FastifyInstance } from 'fastify';
import { appScoped } from './app-scoped';
import type { Pool } from 'pg';
import { PgListener } from '../shared/pg-listener';
import { ACCOUNTS_CHANGED_CHANNEL, BUSINESS_CHANGED_CHANNEL, isChanging } from '../projections/change-signals';

/**
 * Per-process cache of the business read endpoints' company data (business info, hours, holidays, the
 * business-accounts document with its quota use), so such a read costs no database round trip.
 *
 * Correctness rests on invalidation (src/projections/change-signals.ts): the projections notify the company id
 * in the transaction that changes its rows, and this cache LISTENs and drops the company's entries; while a
 * projection of this process is applying a change for a company (until shortly after its commit) nothing loaded
 * for that company is cached, and a value loaded while a notification for its company arrived is not cached
 * either, so a write that waited for its read models is visible to the next read. While the LISTEN connection is
 * down the cache is bypassed. An entry may also carry its own expiry (quota use changes as the 24 h window
 * slides) and lives at most `maxAgeMs` (a backstop, e.g. for a rebuild's schema swap).
 */
export class ReadCache {
  private readonly entries = new Map<string, { value: unknown; expires: number; storedAt: number }>();
  /** per channel|company: bumped by every notification */
  private readonly generations = new Map<string, number>();
  private epoch = 0;
  private readonly listener: PgListener;

  constructor(
    pool: Pool,
    private readonly options: { maxEntries?: number; maxAgeMs?: number } = {},
  ) {
    this.listener = new PgListener(pool, [BUSINESS_CHANGED_CHANNEL, ACCOUNTS_CHANGED_CHANNEL], {
      onNotify: (channel, payload) => this.invalidate(channel, payload ?? '*'),
      onReset: () => this.clear(),
    });
  }

  get active(): boolean {
    return this.listener.connection !== undefined;
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  /**
   * The cached value of (channel, company, what), else `load()`'s, cached when nothing may have changed
   * meanwhile. `expiresAt(value)`: the time (ms, of the caller's clock `now`) from which the value is stale by
   * itself (undefined: only invalidation and the backstop age end it).
   */
  async get<T>(
    channel: string,
    companyId: number,
    what: string,
    now: number,
    load: () => Promise<T>,
    expiresAt?: (value: T) => number | undefined,
  ): Promise<T> {
    const company = `${channel}|${companyId}`;
    const key = `${company}|${what}`;
    const quiet = () => !isChanging(channel, companyId) && !isChanging(channel, '*');
    if (this.listener.connection && quiet()) {
      const hit = this.entries.get(key);
      if (hit && hit.expires > now && Date.now() - hit.storedAt < (this.options.maxAgeMs ?? 60_000)) return hit.value as T;
    }
    const client = this.listener.connection;
    const epoch = this.epoch;
    const generation = this.generations.get(company) ?? 0;
    const value = await load();
    if (client && this.listener.connection === client && this.epoch === epoch && (this.generations.get(company) ?? 0) === generation && quiet()) {
      if (this.entries.size >= (this.options.maxEntries ?? 10_000)) this.entries.delete(this.entries.keys().next().value as string);
      this.entries.set(key, { value, expires: expiresAt?.(value) ?? Infinity, storedAt: Date.now() });
    }
    return value;
  }

  private invalidate(channel: string, payload: string): void {
    if (payload === '*') {
      this.clear();
      return;
    }
    const company = `${channel}|${payload}`;
    this.generations.set(company, (this.generations.get(company) ?? 0) + 1);
    for (const key of this.entries.keys()) if (key.startsWith(`${company}|`)) this.entries.delete(key);
  }

  private clear(): void {
    this.epoch++;
    this.entries.clear();
    this.generations.clear();
  }
}

const caches = new WeakMap<FastifyInstance, ReadCache>();

/** The read cache of an app (one LISTEN connection per app), started and stopped with it. */
export function readCacheOf(app: FastifyInstance, pool: Pool): ReadCache {
  return appScoped(caches, app, () => new ReadCache(pool));
}
