import type { Pool } from 'pg';
import { PgListener } from '../shared/pg-listener';
import { type ApiKeyRecord, API_KEYS_CHANGED_CHANNEL, findApiKeyByHash } from '../projections/apikeys/projection';

/** How long a cached lookup is served at most (ms): the bound on a missed notification. */
export const API_KEY_CACHE_MAX_AGE_MS = 30_000;

export interface ApiKeyCacheOptions {
  maxEntries?: number;
  maxAgeMs?: number;
}

/**
 * Per-process cache of API-key lookups (including misses), so an authenticated read costs no extra round trip.
 * Correctness rests on invalidation: the apikeys projection notifies `apikeys_changed` with the key hash in the
 * same transaction that changes the row, and every process LISTENs. While the LISTEN connection is known to be
 * down the cache is bypassed (every request reads the table). A LISTEN connection can also die silently (a
 * half-open TCP connection after a failover or a dropped NAT entry: no error, no notification, for as long as the
 * idle connection sends nothing), so an entry is also read again after `maxAgeMs`: a revocation missed that way
 * still takes effect within it. Expiry is checked on every request against the cached record, so it needs no
 * invalidation.
 */
export class ApiKeyCache {
  private readonly entries = new Map<string, { record: ApiKeyRecord | null; until: number }>();
  /** bumped by every notification: a lookup that overlapped one may have read a stale row */
  private generation = 0;
  private readonly listener: PgListener;
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;

  constructor(
    private readonly pool: Pool,
    options: ApiKeyCacheOptions = {},
  ) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.maxAgeMs = options.maxAgeMs ?? API_KEY_CACHE_MAX_AGE_MS;
    this.listener = new PgListener(pool, [API_KEYS_CHANGED_CHANNEL], {
      onNotify: (_channel, hash) => {
        this.generation++;
        if (hash) this.entries.delete(hash);
        else this.entries.clear();
      },
      onReset: () => this.invalidateAll(),
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

  /** Drops everything (a key changed in this process: exact, no notification delay). */
  invalidateAll(): void {
    this.generation++;
    this.entries.clear();
  }

  async lookup(hash: string): Promise<ApiKeyRecord | undefined> {
    const listening = this.listener.connection;
    const cached = this.entries.get(hash);
    if (listening && cached !== undefined && performance.now() < cached.until) return cached.record ?? undefined;
    const generationBefore = this.generation;
    const readAt = performance.now();
    const record = await findApiKeyByHash(this.pool, hash);
    // Cache only when we listened for the whole lookup and no change was announced meanwhile.
    if (listening && this.listener.connection === listening && this.generation === generationBefore) {
      this.entries.delete(hash); // set again below: the newest entries are the last dropped
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
      this.entries.set(hash, { record: record ?? null, until: readAt + this.maxAgeMs });
    }
    return record;
  }
}
