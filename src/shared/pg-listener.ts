import type { Notification, Pool, PoolClient } from 'pg';

export interface ListenerHandlers {
  onNotify(channel: string, payload: string | undefined): void;
  /** the connection was (re)established or lost: whatever was derived from earlier notifications is suspect */
  onReset(): void;
  /**
   * LISTEN is active, after the first connect and after every reconnect: notifications sent while it was not (a
   * lost connection, Postgres restarted) were missed, so whatever they would have said must be read afresh.
   */
  onListening?(): void;
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
  /** removes this listener's handlers from the connection it last made */
  private detach = (): void => undefined;

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
    if (await this.listen()) this.handlers.onListening?.(); // outside listen(): its failure is not a lost connection
  }

  /** whether LISTEN is now active on a new connection */
  private async listen(): Promise<boolean> {
    try {
      const client = await this.pool.connect();
      const onNotification = (msg: Notification) => this.handlers.onNotify(msg.channel, msg.payload || undefined);
      const onLost = () => this.lost(client);
      client.on('notification', onNotification);
      client.on('error', onLost);
      client.on('end', onLost);
      // a connection handed back to the pool must not call this listener's handlers for its next user
      this.detach = () => {
        client.off('notification', onNotification);
        client.off('error', onLost);
        client.off('end', onLost);
      };
      if (this.stopped) {
        this.detach();
        client.release(); // stopped while connecting: the pool must be able to end
        return false;
      }
      await client.query(this.channels.map((c) => `LISTEN ${c}`).join('; '));
      if (this.stopped) {
        client.release(true);
        return false;
      }
      this.handlers.onReset(); // anything derived before we listened may be stale
      this.client = client;
      return true;
    } catch {
      this.scheduleReconnect();
      return false;
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
      this.detach();
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
