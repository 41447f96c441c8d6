import type { Pool, PoolClient } from 'pg';

export interface ListenerHandlers {
  onNotify(channel: string, payload: string | undefined): void;
  /** the connection was (re)established or lost: whatever was derived from earlier notifications is suspect */
  onReset(): void;
}

/**
 * One dedicated LISTEN connection for a set of channels, re-established (every second) after it is lost.
 * `connection` changes identity on every (re)connect and is undefined while down, so a cache can tell whether it
 * listened for the whole of a lookup.
 */
export class PgListener {
  private client: PoolClient | undefined;
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private starting: Promise<void> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly channels: readonly string[],
    private readonly handlers: ListenerHandlers,
  ) {}

  get connection(): PoolClient | undefined {
    return this.client;
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.starting = this.connect();
    await this.starting;
  }

  private async connect(): Promise<void> {
    try {
      const client = await this.pool.connect();
      client.on('notification', (msg) => this.handlers.onNotify(msg.channel, msg.payload || undefined));
      client.on('error', () => this.lost(client));
      client.on('end', () => this.lost(client));
      if (this.stopped) return void client.release(); // stopped while connecting: the pool must be able to end
      await client.query(this.channels.map((c) => `LISTEN ${c}`).join('; '));
      if (this.stopped) return void client.release(true);
      this.handlers.onReset(); // anything derived before we listened may be stale
      this.client = client;
    } catch {
      this.scheduleReconnect();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    await this.starting; // a connection being made is released by connect(), never kept
    const client = this.client;
    this.client = undefined;
    this.handlers.onReset();
    if (client) {
      await client.query(this.channels.map((c) => `UNLISTEN ${c}`).join('; ')).catch(() => undefined);
      client.release();
    }
  }

  private lost(client: PoolClient): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.handlers.onReset();
    client.release(true);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.starting = this.connect();
    }, 1000);
    this.reconnectTimer.unref();
  }
}
