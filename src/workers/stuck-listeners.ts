// Sessions of this database stuck sending notifications to a client that does not read them (review 16b): a process
// paused (SIGSTOP, `docker pause`, a VM freeze) keeps its LISTEN connections, and once the notifications sent to it
// fill the socket buffers its backend waits in ClientWrite, idle. Postgres cannot trim its notification queue past
// that session: the queue grows with every event append (each one notifies) until, at 8 GB, every NOTIFY fails, and
// every append with it. Each `serve` and `worker` looks every 30 s and ends a session seen stuck so at every look for
// STUCK_LISTENER_MS: a live listener reads its notifications in milliseconds; a paused one, resumed, finds its
// connection closed and listens again (src/shared/pg-listener.ts reconnects, and its users read afresh).
// Only client sessions of this database and of our own role are candidates (review 17): another user's session is not
// ours to end (and ending it may be refused: a role seeing others' states through pg_read_all_stats may not signal
// them, and a refusal failed the whole look). "At every look" holds only while the looks come on time: after a gap
// (this process paused, looks failing) what was seen before the gap counts for nothing.
import type { Pool } from 'pg';
import type { Services } from '../services';
import { startCronJob } from './cron-job';

export const STUCK_LISTENER_MS = 5 * 60_000;
export const STUCK_LISTENERS_CRON = '*/30 * * * * *';
export const STUCK_LISTENERS_LOOK_EVERY_MS = 30_000;

// idle and writing: sending what the session sends unasked (notifications) to a client that does not read
const STUCK_SQL = `SELECT pid, backend_start::text AS started, application_name, pg_notification_queue_usage() AS queue_usage
  FROM pg_stat_activity
  WHERE datname = current_database() AND usename = session_user AND backend_type = 'client backend'
    AND pid <> pg_backend_pid() AND state = 'idle' AND wait_event = 'ClientWrite'`;

export interface StuckListener {
  pid: number;
  applicationName: string;
  /** seconds it has been seen stuck */
  stuckForS: number;
  queueUsage: number;
}

export interface StuckListenerWatchOptions {
  stuckMs?: number;
  /** the looks' period: a look later than twice it starts the count again */
  lookEveryMs?: number;
  now: () => number;
  /** a session that could not be ended (it is tried again at the next look) */
  onRefused?: (pid: number, err: unknown) => void;
}

/** A look at the sessions stuck writing: those seen so at every look for `stuckMs` are ended, and returned. */
export function stuckListenerWatch(pool: Pool, options: StuckListenerWatchOptions): () => Promise<StuckListener[]> {
  const stuckMs = options.stuckMs ?? STUCK_LISTENER_MS;
  const maxGapMs = 2 * (options.lookEveryMs ?? STUCK_LISTENERS_LOOK_EVERY_MS);
  const firstSeen = new Map<string, number>(); // pid and start: a pid reused by a new session starts again
  let lastLook: number | undefined;
  return async () => {
    const rows = (await pool.query<{ pid: number; started: string; application_name: string; queue_usage: number }>(STUCK_SQL)).rows;
    const now = options.now();
    if (lastLook !== undefined && now - lastLook > maxGapMs) firstSeen.clear();
    lastLook = now;
    const stillStuck = new Set<string>();
    const ended: StuckListener[] = [];
    for (const r of rows) {
      const key = `${r.pid}@${r.started}`;
      stillStuck.add(key);
      const since = firstSeen.get(key) ?? now;
      firstSeen.set(key, since);
      if (now - since < stuckMs) continue;
      const t = await pool.query<{ ended: boolean }>('SELECT pg_terminate_backend($1) AS ended', [r.pid]).then(
        (res) => res.rows[0],
        (err: unknown) => void options.onRefused?.(r.pid, err),
      );
      if (t?.ended) ended.push({ pid: r.pid, applicationName: r.application_name, stuckForS: Math.round((now - since) / 1000), queueUsage: Number(r.queue_usage) });
    }
    for (const key of firstSeen.keys()) if (!stillStuck.has(key)) firstSeen.delete(key);
    return ended;
  };
}

/** The worker entry (src/workers/index.ts). */
export function startStuckListenerWatch(services: Services): { stop(): Promise<void> } {
  const look = stuckListenerWatch(services.pool, {
    now: () => Date.now(),
    onRefused: (pid, err) => services.logger.warn({ pid, err }, 'stuck listeners: could not end a stuck session'),
  });
  return startCronJob('stuck-listeners', STUCK_LISTENERS_CRON, () =>
    look()
      .then((ended) => {
        for (const s of ended) {
          services.logger.warn({ ...s }, 'ended a database session stuck sending notifications to a client that does not read them (a paused process?)');
        }
      })
      .catch((err) => services.logger.warn({ err }, 'stuck listeners: the look failed')));
}
