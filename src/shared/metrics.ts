import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  deadLetters: Counter<'topic'>;
  eventsAppended: Counter<'type'>;
  /** answers replayed under an Idempotency-Key (docs/idempotency.md) */
  idempotentReplays: Counter<'route'>;
  /** client webhook attempts of this process's sender (docs/webhooks.md, "Operating") */
  webhookAttempts: Counter<'outcome'>;
  webhookAttemptDuration: Histogram<'outcome'>;
  /** deliveries marked failed (the retry schedule exhausted, or a 410) */
  webhookDeliveriesFailed: Counter;
  webhookEndpointsDisabled: Counter<'reason'>;
  /** rows of the webhook log deleted by this process's retention purge (docs/webhooks.md, "Retention") */
  webhookLogPurged: Counter<'table'>;
  /** requests this process's sender has open to client endpoints, and endpoints holding their most (docs/webhooks.md, "Fairness") */
  webhookRequestsInFlight: Gauge;
  webhookEndpointsFull: Gauge;
  /** endpoints paused by a failed answer's Retry-After (docs/webhooks.md, "Delivery") */
  webhookEndpointPauses: Counter;
  /** in-place waits of the delivery consumer for owners of provider statuses not known yet (docs/sends.md, "Delivery consumer") */
  deliveryOwnerWaits: Counter;
}

/** How a client webhook attempt ended: a 2xx, another answer, or no answer (and why). */
export type WebhookAttemptOutcome = 'success' | 'http_error' | 'timeout' | 'connection_error' | 'address_refused' | 'secret_unsealable';

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
    idempotentReplays: new Counter({
      name: 'switchboard_idempotent_replays_total',
      help: 'answers this process replayed for a repeated Idempotency-Key (header Idempotent-Replayed), by route',
      labelNames: ['route'],
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'switchboard_webhook_attempts_total',
      help: 'client webhook attempts made by this process, by outcome (success, http_error, timeout, connection_error, address_refused, secret_unsealable)',
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
    webhookLogPurged: new Counter({
      name: 'switchboard_webhook_log_purged_total',
      help: 'rows of the client webhook log this process deleted as older than WEBHOOKS_RETENTION_DAYS, by table (attempts, deliveries)',
      labelNames: ['table'],
      registers: [registry],
    }),
    webhookRequestsInFlight: new Gauge({
      name: 'switchboard_webhook_requests_in_flight',
      help: 'client webhook requests this process has open now',
      registers: [registry],
    }),
    webhookEndpointsFull: new Gauge({
      name: 'switchboard_webhook_endpoints_full',
      help: 'client endpoints holding as many deliveries as they may have in flight in this process (slow or not answering), or paused by a Retry-After: the claims pass them over',
      registers: [registry],
    }),
    webhookEndpointPauses: new Counter({
      name: 'switchboard_webhook_endpoint_pauses_total',
      help: 'times this process paused a client endpoint for a failed answer\'s Retry-After (at most 30 s each)',
      registers: [registry],
    }),
    deliveryOwnerWaits: new Counter({
      name: 'switchboard_delivery_owner_waits_total',
      help: 'in-place waits (up to ownerWaitMs) of the delivery consumer for the owners of provider statuses not known yet: one per consumer call for all its statuses (Kafka), one per status record by record',
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
  /** how far the fan-out (which queues the deliveries) is behind the event log, in seconds */
  fanOutLagSeconds: number;
}

/** Values read from the database at scrape time are read at most once a second, whatever the number of scrapes (/metrics needs no key). */
const SCRAPE_READ_EVERY_MS = 1_000;

/** `read`, shared by the scrapes of one second; a failed read is tried again at the next scrape. */
function scrapeTimeReader<T>(read: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    if (last === undefined || Date.now() - last.at >= SCRAPE_READ_EVERY_MS) {
      const reading = { at: Date.now(), value: read() };
      reading.value.catch(() => {
        if (last === reading) last = undefined;
      });
      last = reading;
    }
    return last.value;
  };
}

/**
 * The client webhook queue as gauges, read at scrape time: `switchboard_webhook_deliveries_due`,
 * `switchboard_webhook_oldest_due_seconds` (the signal that senders fall behind) and
 * `switchboard_webhook_fanout_lag_seconds` (that the fan-out queueing them does). The same values on every process:
 * aggregate them with max, not sum.
 */
export function exposeWebhookBacklog(metrics: Metrics, read: () => Promise<WebhookBacklog>): void {
  const current = scrapeTimeReader(read);
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
  gaugeOf('switchboard_webhook_fanout_lag_seconds', 'age of the oldest event the webhook fan-out has not passed yet, in seconds (0 at the head of the log)', (b) => b.fanOutLagSeconds);
}

/** A read model's health as its stored checkpoint shows it (docs/core.md, "Projections"). */
export interface ProjectionHealth {
  projection: string;
  /** its last batch failed (the runner retries it with backoff) */
  failing: boolean;
  /** how old the oldest event after its checkpoint is, in seconds (0 when it is at the head of the log) */
  lagSeconds: number;
}

/**
 * The projections as gauges, read at scrape time: `switchboard_projection_lag_seconds{projection}` and
 * `switchboard_projection_failing{projection}`. The same values on every process (the checkpoints are shared). A
 * failed read leaves both out of that scrape.
 */
export function exposeProjectionHealth(metrics: Metrics, read: () => Promise<ProjectionHealth[]>): void {
  const current = scrapeTimeReader(read);
  const gaugeOf = (name: string, help: string, pick: (h: ProjectionHealth) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['projection'],
      registers: [metrics.registry],
      async collect() {
        this.reset();
        try {
          for (const h of await current()) this.labels(h.projection).set(pick(h));
        } catch {
          // the database did not answer (/readyz says so): no sample rather than an old one
        }
      },
    });
  gaugeOf('switchboard_projection_lag_seconds', 'age of the oldest event a read model has not passed yet, in seconds (0 at the head of the log)', (h) => h.lagSeconds);
  gaugeOf('switchboard_projection_failing', '1 while a read model\'s last batch failed (the runner retries it), else 0', (h) => (h.failing ? 1 : 0));
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
