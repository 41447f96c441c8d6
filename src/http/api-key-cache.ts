import type { Pool } from 'pg';
import { PgListener } from '../shared/pg-listener';
import { type ApiKeyRecord, API_KEYS_CHANGED_CHANNEL, findApiKeyByHash } from '../projections/apikeys/projection';

/**
 * Per-process cache of API-key lookups (including misses), so an authenticated read costs no extra round trip.
 * Correctness rests on invalidation, not on a TTL: the apikeys projection notifies `apikeys_changed` with the
 * key hash in the same transaction that changes the row, and every process LISTENs. While the LISTEN
 * connection is down the cache is bypassed (every request reads the table). Expiry is checked on every request
 * against the cached record, so it needs no invalidation.
 */
export class ApiKeyCache {
  private readonly entries = new Map<string, ApiKeyRecord | null>();
  /** bumped by every notification: a lookup that overlapped one may have read a stale row */
  private generation = 0;
  private readonly listener: PgListener;

  constructor(
    private readonly pool: Pool,
    private readonly maxEntries = 10_000,
  ) {
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
    if (listening && this.entries.has(hash)) return this.entries.get(hash) ?? undefined;
    const generationBefore = this.generation;
    const record = await findApiKeyByHash(this.pool, hash);
    // Cache only when we listened for the whole lookup and no change was announced meanwhile.
    if (listening && this.listener.connection === listening && this.generation === generationBefore) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
      this.entries.set(hash, record ?? null);
    }
    return record;
  }
}
