import type { Pool } from 'pg';
import type { Logger } from 'pino';
import type { Config } from './config';
import type { EventRegistry } from './events/registry';
import type { EventStore } from './ports/event-store';
import type { MessagingProvider } from './ports/provider';
import type { RecordTransport } from './ports/transport';
import type { ProjectionRunner } from './workers/projection-runner';
import type { Metrics } from './shared/metrics';

export interface Secrets {
  anonymizationSecret: string;
  apiKeyPepper: string;
}

/** What the composition root (main.ts) or a test builds once and hands to HTTP routes and workers. */
export interface Services {
  config: Config;
  secrets: Secrets;
  pool: Pool;
  /** the qualitative export's connections (a page holds one while its client reads); main.ts gives it its own pool */
  exportPool: Pool;
  /** the Idempotency-Key records' connections: commits without waiting for the WAL flush (main.ts; docs/idempotency.md) */
  idempotencyPool: Pool;
  /** the validating event store (schemas checked on append and read) */
  store: EventStore;
  registry: EventRegistry;
  runner: ProjectionRunner;
  transport: RecordTransport;
  /** the messaging provider (sandbox or cloud-api, picked from config by main.ts; tests may pass a double) */
  provider: MessagingProvider;
  metrics: Metrics;
  logger: Logger;
  /** injectable clock */
  now: () => Date;
}
