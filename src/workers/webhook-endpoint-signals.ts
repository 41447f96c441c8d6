import type { Pool } from 'pg';
import type { Logger } from 'pino';
import { WEBHOOK_ENDPOINTS_CHANGED_CHANNEL } from '../projections/change-signals';
import { PgListener } from '../shared/pg-listener';
import { type EndpointPause, pauseOf, runningPauses, WEBHOOK_ENDPOINT_PAUSED_CHANNEL } from './webhook-pauses';

// What a sender hears of its endpoints (docs/webhooks.md, "An endpoint changed under a lane", "Retry-After"), on one
// LISTEN connection: an endpoint changed (its URL or event types, disabled, deleted), or paused by another sender.
// Notifications sent while the connection was down are missed: when LISTEN starts again any endpoint may have
// changed, and the pauses still running are read from Postgres.

export interface EndpointSignalHandlers {
  /** the endpoint changed, or (no id) any may have: notifications were missed */
  changed(endpointId?: string): void;
  paused(pause: EndpointPause): void;
}

export function listenForEndpointSignals(pool: Pool, logger: Logger, handlers: EndpointSignalHandlers): PgListener {
  return new PgListener(pool, [WEBHOOK_ENDPOINTS_CHANGED_CHANNEL, WEBHOOK_ENDPOINT_PAUSED_CHANNEL], {
    onNotify: (channel, payload) => {
      if (channel === WEBHOOK_ENDPOINTS_CHANGED_CHANNEL && payload) return handlers.changed(payload);
      const pause = channel === WEBHOOK_ENDPOINT_PAUSED_CHANNEL ? pauseOf(payload) : undefined;
      if (pause) handlers.paused(pause);
    },
    onReset: () => undefined, // while it is down the lanes keep what they hold; it is given back when LISTEN starts again
    onListening: () => {
      handlers.changed();
      void readRunningPauses(pool, logger, handlers.paused);
    },
  });
}

/** Hands over the pauses running now (a sender starting, or whose LISTEN starts again, missed their notifications). */
export async function readRunningPauses(pool: Pool, logger: Logger, paused: EndpointSignalHandlers['paused']): Promise<void> {
  try {
    for (const pause of await runningPauses(pool)) paused(pause);
  } catch (err) {
    logger.warn({ err }, 'could not read the webhook endpoints paused by other senders');
  }
}

/** endpoints whose changes are told apart at most (past it, a change counts as a change of any endpoint) */
const MAX_TRACKED = 10_000;

/**
 * The order of the endpoint changes a sender heard: a read of endpoints taken at `mark()` may hold an endpoint as it
 * was before a change heard since (`since`), and is read again for it.
 */
export class EndpointChanges {
  private count = 0;
  private anyAt = 0;
  private readonly at = new Map<string, number>();

  changed(endpointId?: string): void {
    this.count++;
    if (endpointId !== undefined && this.at.size < MAX_TRACKED) return void this.at.set(endpointId, this.count);
    this.anyAt = this.count;
    this.at.clear();
  }

  mark(): number {
    return this.count;
  }

  since(mark: number, endpointId: string): boolean {
    return this.anyAt > mark || (this.at.get(endpointId) ?? 0) > mark;
  }
}
