import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  deadLetters: Counter<'topic'>;
  eventsAppended: Counter<'type'>;
  /** client webhook attempts of this process's sender (docs/webhooks.md, "Operating") */
  webhookAttempts: Counter<'outcome'>;
  webhookAttemptDuration: Histogram<'outcome'>;
  /** deliveries marked failed (the retry schedule exhausted, or a 410) */
  webhookDeliveriesFailed: Counter;
  webhookEndpointsDisabled: Counter<'reason'>;
}

/** How a client webhook attempt ended: a 2xx, another answer, or no answer (and why). */
export type WebhookAttemptOutcome = 'success' | 'http_error' | 'timeout' | 'connection_error' | 'address_refused';

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    httpDuration: new Histogram({
      name: 'switchboard_http_request_duration_seconds',
      help: 'HTTP request duration by route and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    deadLetters: new Counter({
      name: 'switchboard_dead_letters_total',
      help: 'records sent to a dead-letter topic, by source topic',
      labelNames: ['topic'],
      registers: [registry],
    }),
    eventsAppended: new Counter({
      name: 'switchboard_events_appended_total',
      help: 'events appended by this process, by type',
      labelNames: ['type'],
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'switchboard_webhook_attempts_total',
      help: 'client webhook attempts made by this process, by outcome (success, http_error, timeout, connection_error, address_refused)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    webhookAttemptDuration: new Histogram({
      name: 'switchboard_webhook_attempt_duration_seconds',
      help: 'client webhook attempts from the request to the answer (or to giving up), by outcome',
      labelNames: ['outcome'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    webhookDeliveriesFailed: new Counter({
      name: 'switchboard_webhook_deliveries_failed_total',
      help: 'client webhook deliveries this process marked failed (the retry schedule exhausted, or HTTP 410)',
      registers: [registry],
    }),
    webhookEndpointsDisabled: new Counter({
      name: 'switchboard_webhook_endpoints_disabled_total',
      help: 'webhook endpoints this process disabled, by reason (gone: HTTP 410; failing: every attempt failed for 5 days)',
      labelNames: ['reason'],
      registers: [registry],
    }),
  };
}

/** The deliveries waiting for a sender, read from the database (every process sees the same queue). */
export interface WebhookBacklog {
  /** deliveries due now and not taken by a sender, counted up to a cap */
  due: number;
  /** how long the oldest of them has been due, in seconds (0 when none is) */
  oldestDueSeconds: number;
}

/** Scrapes read the backlog at most once a second, whatever their number (/metrics needs no key). */
const BACKLOG_READ_EVERY_MS = 1_000;

/**
 * The client webhook queue as gauges, read at scrape time: `switchboard_webhook_deliveries_due` and
 * `switchboard_webhook_oldest_due_seconds` (the signal that senders fall behind). The same values on every
 * process: aggregate them with max, not sum.
 */
export function exposeWebhookBacklog(metrics: Metrics, read: () => Promise<WebhookBacklog>): void {
  let last: { at: number; value: Promise<WebhookBacklog> } | undefined;
  const current = () => {
    if (last === undefined || Date.now() - last.at >= BACKLOG_READ_EVERY_MS) {
      const reading = { at: Date.now(), value: read() };
      reading.value.catch(() => {
        if (last === reading) last = undefined; // a failed read is tried again at the next scrape
      });
      last = reading;
    }
    return last.value;
  };
  const gaugeOf = (name: string, help: string, pick: (b: WebhookBacklog) => number) =>
    new Gauge({
      name,
      help,
      registers: [metrics.registry],
      async collect() {
        try {
          this.set(pick(await current()));
        } catch {
          this.set(NaN); // the database did not answer (/readyz says so): unknown, and the rest of the scrape goes on
        }
      },
    });
  gaugeOf('switchboard_webhook_deliveries_due', 'client webhook deliveries due now and not taken by a sender (counted up to 10,000)', (b) => b.due);
  gaugeOf('switchboard_webhook_oldest_due_seconds', 'how long the oldest due client webhook delivery has waited for a sender, in seconds', (b) => b.oldestDueSeconds);
}

/**
 * The Postgres event store's group commit of stream creations (docs/core.md, "Event store"), read at scrape time:
 * creations per batch is `creations_total / batches_total` over any interval (1 when nothing arrives together).
 */
export function exposeCreationGroupCommit(metrics: Metrics, stats: Readonly<{ batches: number; creations: number }>): void {
  const countOf = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers: [metrics.registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  countOf('switchboard_event_store_creation_batches_total', 'statements of the event store that created streams (each one or more creations)', () => stats.batches);
  countOf('switchboard_event_store_creations_total', 'streams created through those statements', () => stats.creations);
}
