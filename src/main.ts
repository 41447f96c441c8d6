import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Pool } from 'pg';
import type { Config } from './config';
import { eventLogAheadOfServer, PostgresEventStore } from './adapters/event-store/postgres';
import { InProcessTransport } from './adapters/in-process/transport';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './adapters/postgres/embedded';
import { migrate, type MigrationsLockHolder } from './adapters/postgres/migrations';
import { createEventStorePool, createPool } from './adapters/postgres/pool';
import { createProvider } from './adapters/provider';
import { createEventRegistry } from './events/catalogue';
import { ValidatingEventStore } from './events/validating-store';
import { buildApp } from './http/app';
import { buildOpsApp } from './http/ops-app';
import { createProcessLogger, httpLoggerOptions } from './observability/logging';
import type { EventStore } from './ports/event-store';
import type { MessagingProvider } from './ports/provider';
import type { RecordTransport } from './ports/transport';
import { allProjections } from './projections/registry';
import { readProjectionHealth } from './projections/store';
import { deliveryBacklog } from './projections/webhooks/deliveries';
import type { Secrets, Services } from './services';
import { createMetrics, exposeCreationGroupCommit, exposeProjectionHealth, exposeWebhookBacklog } from './shared/metrics';
import { retryTransient } from './shared/retry';
import { isAccessRefused, postgresTarget, startupStep, waitUntilAnswers } from './shared/startup-step';
import { startWorkers, type Workers } from './workers';
import { ProjectionRunner } from './workers/projection-runner';
import { fanOutLagSeconds } from './workers/webhook-fanout';
import { parseEsdbConnectionString } from './shared/esdb-connection-string';

export type Role = 'serve' | 'worker' | 'cli';

/** EventStoreDB did not answer at start within STARTUP_WAIT_S; src/cli/startup-errors.ts names the cause and the fix. */
export class EventStoreUnreachableError extends Error {
  override name = 'EventStoreUnreachableError';

  constructor(
    /** the hosts of EVENTSTORE_URL (`host:port`), without its credentials and options */
    readonly target: string,
    cause: unknown,
    readonly waitedMs: number,
  ) {
    super(`EventStoreDB (${target}): ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/**
 * The hosts of an EventStoreDB connection string, as the client's own parser reads them: no credentials (a password
 * may hold `/` or `?`, which a pattern would cut wrongly and print), no options.
 */
export function eventStoreTarget(url: string): string {
  try {
    return parseEsdbConnectionString(url).hosts.map((h) => `${h.address}:${h.port}`).join(',');
  } catch {
    return 'EVENTSTORE_URL'; // config refuses a string the parser does not take: not reached
  }
}

/**
 * Start-up reaches EventStoreDB before anything uses it (the projection runner, a one-shot command): an address
 * nothing answers on fails the start, rather than a service that serves and logs failed batches for ever.
 */
async function reachEventStore(store: EventStore, url: string, waitMs: number): Promise<void> {
  try {
    await waitUntilAnswers(() => store.ping(), waitMs, undefined, isAccessRefused);
  } catch (err) {
    throw new EventStoreUnreachableError(eventStoreTarget(url), err, waitMs);
  }
}

/** The Postgres event log was written by a server ahead of this one's transaction counter (eventLogAheadOfServer). */
export class EventLogAheadOfServerError extends Error {
  override name = 'EventLogAheadOfServerError';

  constructor(
    /** `Postgres at host:port/database` (DATABASE_URL), or `the embedded Postgres` */
    readonly target: string,
    readonly newestTxId: string,
    readonly nextTxId: string,
  ) {
    super(`the event log's newest position (transaction ${newestTxId}) is ahead of the next transaction id (${nextTxId}) of ${target}`);
  }
}

export interface Runtime {
  services: Services;
  app?: FastifyInstance;
  url?: string;
  /** `worker`'s ops listener (/healthz, /readyz, /metrics), when WORKER_OPS_PORT is set */
  opsUrl?: string;
  /**
   * A stop begins: /readyz answers 503, and `serve` goes on serving for SHUTDOWN_DELAY_S (load balancers catch up)
   * unless `delay` is false (a stop asked during start-up: no balancer has seen it ready).
   */
  beginStop(options?: { delay?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

/** Secrets: from the environment, else generated once into DATA_DIR (embedded default only). */
export function resolveSecrets(config: Config): Secrets {
  const { anonymizationSecret, apiKeyPepper } = config.secrets;
  if (anonymizationSecret && apiKeyPepper) return { anonymizationSecret, apiKeyPepper };
  const dir = resolve(config.dataDir);
  const file = join(dir, 'secrets.json');
  mkdirSync(dir, { recursive: true });
  const stored: Partial<Secrets> = existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : {};
  const secrets: Secrets = {
    anonymizationSecret: anonymizationSecret ?? stored.anonymizationSecret ?? randomBytes(32).toString('hex'),
    apiKeyPepper: apiKeyPepper ?? stored.apiKeyPepper ?? randomBytes(32).toString('hex'),
  };
  if (stored.anonymizationSecret !== secrets.anonymizationSecret || stored.apiKeyPepper !== secrets.apiKeyPepper) {
    writeFileSync(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  }
  return secrets;
}

/** The compose file's local-only default (docker-compose.yml): published, so it anonymizes nothing. */
const COMPOSE_ANONYMIZATION_SECRET = 'local-only-anonymization-secret-change-me';

/**
 * Why the anonymization secret is weak, or undefined: the export's ids are keyed HMACs of real ids, and an export
 * shows pairs of both (the spec's `company_id` beside `client_id`), so a known secret is confirmed offline and then
 * every customer's id reversed by trying phone numbers (docs/privacy.md). Only the compose file's published default
 * is named (a warning, not a refusal): a length rule would add a line to the output of every local run and test
 * suite that uses a short secret.
 */
export function anonymizationSecretWeakness(secret: string): string | undefined {
  return secret === COMPOSE_ANONYMIZATION_SECRET ? "it is docker-compose.yml's published local-only default" : undefined;
}

/** Creates `dir` a level at a time (a recursive mkdir loops forever where the kernel refuses one, as in /proc). */
function writableDir(dir: string): void {
  const path = resolve(dir);
  if (!existsSync(path)) {
    if (dirname(path) !== path) writableDir(dirname(path));
    mkdirSync(path);
  }
  accessSync(path, constants.W_OK);
}

export interface AssembleInput {
  config: Config;
  secrets: Secrets;
  pool: Pool;
  /** default: the main pool (main.ts always gives the export its own) */
  exportPool?: Pool;
  /** default: the main pool (main.ts gives the Idempotency-Key records an asynchronously committing one) */
  idempotencyPool?: Pool;
  store: EventStore;
  transport: RecordTransport;
  logger: Logger;
  now?: () => Date;
  /** default: built from config.provider (sandbox or cloud-api) */
  provider?: MessagingProvider;
}

/** Wires services from already-built adapters (main and the tests share this). */
export function assembleServices(input: AssembleInput): Services {
  const registry = createEventRegistry();
  const store = new ValidatingEventStore(input.store, registry);
  // the runner reads the adapter and upcasts each event on its own: an event its schema refuses stalls only the
  // projections that handle its type (docs/core.md, "Projections"), not every projection's reads
  const runner = new ProjectionRunner(input.pool, input.store, allProjections, {
    logger: input.logger,
    upcast: (e) => (registry.has(e.type) ? registry.upcast(e) : e),
  });
  const metrics = createMetrics();
  if (input.store instanceof PostgresEventStore) exposeCreationGroupCommit(metrics, input.store.creations.stats);
  const now = input.now ?? (() => new Date());
  // the lags read the adapter itself, not the validating store: an event its schema refuses, the likeliest reason
  // for a stalled reader, must still show as lag rather than fail the read
  exposeWebhookBacklog(metrics, async () => ({
    ...(await deliveryBacklog(input.pool, now())),
    fanOutLagSeconds: await fanOutLagSeconds({ pool: input.pool, store: input.store }, now()),
  }));
  exposeProjectionHealth(metrics, () => readProjectionHealth(input.pool, input.store, allProjections, now()));
  return {
    config: input.config,
    secrets: input.secrets,
    pool: input.pool,
    exportPool: input.exportPool ?? input.pool,
    idempotencyPool: input.idempotencyPool ?? input.pool,
    store,
    registry,
    runner,
    transport: input.transport,
    provider: input.provider ?? createProvider(input.config.provider, input.transport, input.logger),
    metrics,
    logger: input.logger,
    now,
  };
}

/**
 * How long a stop lets HTTP requests finish before it ends their connections: a client that stopped reading an export
 * page would otherwise hold the stop until the forced exit (30 s, src/cli/serve.ts), and the workers after it would
 * never stop gracefully (a bulk window's answers unrecorded, webhooks sent and not recorded, so sent again).
 */
export const HTTP_DRAIN_MS = 20_000;

async function closeWithin(app: FastifyInstance, ms: number, logger: Logger): Promise<void> {
  const closed = app.close();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'deadline'>((ok) => (timer = setTimeout(() => ok('deadline'), ms)));
  if ((await Promise.race([closed.then(() => 'closed' as const), deadline])) === 'deadline') {
    logger.warn({ ms }, 'HTTP requests still running at the drain deadline: closing their connections');
    app.server.closeAllConnections();
  }
  clearTimeout(timer);
  await closed;
}

/**
 * The process's logger (pino at LOG_LEVEL; credentials, signatures and Postgres row values kept out:
 * src/observability/logging.ts), to `output` (serve, worker: src/cli/log-output.ts) or stdout.
 */
export function createLogger(config: Config, output?: DestinationStream): Logger {
  return createProcessLogger(config.logLevel, output);
}

/** Where `logger` writes: the HTTP loggers write there too, not to an output of their own. */
const outputOf = (logger: Logger): DestinationStream => (logger as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];

/** The composition root: picks adapters from config, wires, starts what the role runs. */
export async function startRuntime(config: Config, role: Role, options: { logger?: Logger } = {}): Promise<Runtime> {
  const logger = options.logger ?? createLogger(config);
  const cleanups: Array<() => Promise<unknown>> = [];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch((err) => logger.error({ err }, 'shutdown step failed'));
    cleanups.length = 0;
  };
  try {
    // how long start-up waits for Postgres and Kafka to answer before it gives up (src/cli/startup-errors.ts)
    const waitMs = config.startup?.waitMs ?? 60_000;
    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      await startupStep('data-dir', resolve(config.dataDir), () => writableDir(config.dataDir));
      const embedded: EmbeddedPostgresHandle = await startupStep('embedded-postgres', resolve(config.dataDir), () =>
        startEmbeddedPostgres(config.dataDir, (message) => logger.info(message)));
      cleanups.push(() => embedded.stop());
      databaseUrl = embedded.url;
    }
    const secrets = resolveSecrets(config);
    const weakness = anonymizationSecretWeakness(secrets.anonymizationSecret);
    if (weakness) {
      logger.warn(`ANONYMIZATION_SECRET is weak (${weakness}): the export's anonymized ids can be reversed by guessing it; set ANONYMIZATION_SECRET to 32 random bytes or more (docs/privacy.md)`);
    }
    const pool = createPool(databaseUrl, role === 'cli' ? 4 : 20);
    cleanups.push(() => pool.end());
    // A page holds its connection while the HTTP client reads: exports get their own, so they cannot starve the rest.
    const exportPool = createPool(databaseUrl, config.export.maxConcurrent);
    cleanups.push(() => exportPool.end());
    // A lost key record only re-runs a command that is idempotent per key anyway: no WAL flush wait for them.
    const idempotencyPool = createPool(databaseUrl, role === 'cli' ? 1 : 4, { asyncCommit: true });
    cleanups.push(() => idempotencyPool.end());
    const onRetry = (err: unknown, step: string, attempt: number) => logger.warn({ err, step, attempt }, 'database unavailable during start-up; retrying');
    const database = config.databaseUrl ? postgresTarget(config.databaseUrl) : 'the embedded Postgres';
    // a start waiting for another process's migrations says who holds their lock, after 10 s and every 10 s
    const onWaiting = (holder: MigrationsLockHolder | undefined, waitedMs: number) =>
      logger.warn({ holder, waitedMs }, 'waiting for the migrations lock, held by another session');
    await startupStep('database', database, () => retryTransient('migrations', () => migrate(pool, { onWaiting }), { onRetry, maxMs: waitMs }), waitMs);

    let store: EventStore;
    if (config.eventStore.kind === 'esdb') {
      // Loaded only when configured: the gRPC client is heavy to load.
      const { EsdbEventStore } = require('./adapters/event-store/esdb') as typeof import('./adapters/event-store/esdb');
      store = new EsdbEventStore({ connectionString: config.eventStore.url });
      cleanups.push(() => store.close());
      await reachEventStore(store, config.eventStore.url, waitMs);
    } else {
      // a log restored into a server behind it would take appends it never reads (docs/event-log.md)
      const ahead = await eventLogAheadOfServer(pool);
      if (ahead) throw new EventLogAheadOfServerError(config.databaseUrl ? `Postgres at ${database}` : database, ahead.newestTxId, ahead.nextTxId);
      // Its own pool: the event store's statements run on generic plans (see PoolOptions).
      const storePool = role === 'cli' ? createEventStorePool(databaseUrl, 2) : createEventStorePool(databaseUrl);
      cleanups.push(() => storePool.end());
      store = new PostgresEventStore(storePool);
      cleanups.push(() => store.close());
    }

    let transport: RecordTransport;
    if (config.kafka) {
      const { KafkaTransport } = require('./adapters/kafka/transport') as typeof import('./adapters/kafka/transport');
      transport = new KafkaTransport({ brokers: config.kafka.brokers, clientId: config.kafka.clientId, logger });
    } else {
      transport = new InProcessTransport();
    }
    cleanups.push(() => transport.close());
    // A consumer reconnects on its own later; at start an unreachable broker is a configuration problem, said at once.
    if (config.kafka && role !== 'cli') {
      await startupStep('kafka', config.kafka.brokers.join(','), () => waitUntilAnswers(() => transport.ping(), waitMs), waitMs);
    }

    const services = assembleServices({ config, secrets, pool, exportPool, idempotencyPool, store, transport, logger });
    cleanups.push(async () => services.provider.close?.());
    let workers: Workers | undefined;
    if (role === 'cli') {
      await retryTransient('read models', () => services.runner.prepare(), { onRetry, maxMs: waitMs });
    } else {
      await retryTransient('read models', () => services.runner.start(), { onRetry, maxMs: waitMs });
      cleanups.push(() => services.runner.stop());
      workers = await startWorkers(services, { role });
      cleanups.push(() => workers!.stop());
    }

    let app: FastifyInstance | undefined;
    let url: string | undefined;
    if (role === 'serve') {
      app = await buildApp(services, { logger: httpLoggerOptions(config.logLevel, outputOf(logger)) });
      // Closing the app first: stop taking requests, let in-flight ones finish.
      cleanups.push(() => closeWithin(app!, HTTP_DRAIN_MS, logger));
      url = await startupStep('http', `${config.http.host}:${config.http.port}`, () => app!.listen({ port: config.http.port, host: config.http.host }));
    }
    let opsUrl: string | undefined;
    let ops: FastifyInstance | undefined;
    const opsPort = config.worker.opsPort;
    if (role === 'worker' && opsPort !== undefined) {
      ops = await buildOpsApp(services, { logger: httpLoggerOptions(config.logLevel, outputOf(logger)) });
      cleanups.push(() => closeWithin(ops!, HTTP_DRAIN_MS, logger));
      opsUrl = await startupStep('ops-http', `${config.http.host}:${opsPort}`, () => ops!.listen({ port: opsPort, host: config.http.host }));
    }
    const beginStop = async ({ delay = true }: { delay?: boolean } = {}) => {
      for (const listening of [app, ops]) if (listening) listening.readiness.stopping = true;
      if (app && delay && config.http.shutdownDelayMs > 0) {
        logger.info({ ms: config.http.shutdownDelayMs }, 'not ready: serving on until the shutdown delay ends');
        await new Promise((ok) => setTimeout(ok, config.http.shutdownDelayMs));
      }
    };
    return { services, app, url, opsUrl, beginStop, stop: cleanup };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
