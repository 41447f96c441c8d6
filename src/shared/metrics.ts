import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  deadLetters: Counter<'topic'>;
  eventsAppended: Counter<'type'>;
}

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
  };
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
