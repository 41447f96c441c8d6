import type { Pool, PoolClient } from 'pg';
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
  private client: PoolClient | undefined;
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly maxEntries = 10_000,
  ) {}

  get active(): boolean {
    return this.client !== undefined;
  }

  async start(): Promise<void> {
    this.stopped = false;
    try {
      const client = await this.pool.connect();
      client.on('notification', (msg) => {
        this.generation++;
        if (msg.payload) this.entries.delete(msg.payload);
        else this.entries.clear();
      });
      client.on('error', () => this.lost(client));
      client.on('end', () => this.lost(client));
      await client.query(`LISTEN ${API_KEYS_CHANGED_CHANNEL}`);
      this.entries.clear(); // anything cached before we listened may be stale
      this.client = client;
    } catch {
      this.scheduleReconnect();
    }
  }

  /** Drops everything (a key changed in this process: exact, no notification delay). */
  invalidateAll(): void {
    this.generation++;
    this.entries.clear();
  }

  async lookup(hash: string): Promise<ApiKeyRecord | undefined> {
    if (this.client && this.entries.has(hash)) return this.entries.get(hash) ?? undefined;
    const listeningBefore = this.client;
    const generationBefore = this.generation;
    const record = await findApiKeyByHash(this.pool, hash);
    // Cache only when we listened for the whole lookup and no change was announced meanwhile.
    if (listeningBefore && this.client === listeningBefore && this.generation === generationBefore) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
      this.entries.set(hash, record ?? null);
    }
    return record;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    this.entries.clear();
    if (client) {
      await client.query(`UNLISTEN ${API_KEYS_CHANGED_CHANNEL}`).catch(() => undefined);
      client.release();
    }
  }

  private lost(client: PoolClient): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.entries.clear();
    client.release(true);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => void this.start(), 1000);
    this.reconnectTimer.unref();
  }
}
