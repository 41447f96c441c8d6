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

export interface ListenerOptions {
  /**
   * How often the idle LISTEN connection is asked `SELECT 1` (ms). A connection can die silently (a half-open TCP
   * connection after a failover or a dropped NAT entry: no error, no FIN, and an idle connection sends nothing), and
   * a listener on it would miss every notification for ever; a heartbeat not answered within `heartbeatTimeoutMs`
   * counts as a lost connection.
   */
  heartbeatMs?: number;
  heartbeatTimeoutMs?: number;
}

export const LISTENER_HEARTBEAT_MS = 15_000;
export const LISTENER_HEARTBEAT_TIMEOUT_MS = 5_000;

/**
 * One dedicated LISTEN connection for a set of channels, re-established (every second) after it is lost, and
 * checked by a heartbeat while idle.
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
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private readonly heartbeatMs: number;
  private readonly heartbeatTimeoutMs: number;

  constructor(
    private readonly pool: Pool,
    private readonly channels: readonly string[],
    private readonly handlers: ListenerHandlers,
    options: ListenerOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? LISTENER_HEARTBEAT_MS;
    this.heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? LISTENER_HEARTBEAT_TIMEOUT_MS;
  }

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
      this.scheduleHeartbeat(client);
      return true;
    } catch {
      this.scheduleReconnect();
      return false;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.heartbeatTimer);
    await this.starting; // a connection being made is released by connect(), never kept
    const client = this.client;
    this.client = undefined;
    this.handlers.onReset();
    if (client) {
      // a connection that died silently never answers: it is closed, not handed back, after the heartbeat's timeout
      let timer: NodeJS.Timeout | undefined;
      const unlistened = await Promise.race([
        client.query(this.channels.map((c) => `UNLISTEN ${c}`).join('; ')).then(() => true, () => false),
        new Promise<false>((resolve) => (timer = setTimeout(resolve, this.heartbeatTimeoutMs, false))),
      ]);
      clearTimeout(timer);
      this.detach();
      client.release(unlistened ? undefined : true);
    }
  }

  private scheduleHeartbeat(client: PoolClient): void {
    this.heartbeatTimer = setTimeout(() => {
      if (this.client !== client || this.stopped) return;
      const unanswered = setTimeout(() => this.lost(client), this.heartbeatTimeoutMs).unref();
      client.query('SELECT 1').then(
        () => {
          clearTimeout(unanswered);
          if (this.client === client && !this.stopped) this.scheduleHeartbeat(client);
        },
        () => {
          clearTimeout(unanswered);
          this.lost(client);
        },
      );
    }, this.heartbeatMs);
    this.heartbeatTimer.unref();
  }

  private lost(client: PoolClient): void {
    if (this.client !== client) return;
    clearTimeout(this.heartbeatTimer);
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
