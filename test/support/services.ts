import pino from 'pino';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { loadConfig } from '../../src/config';
import { buildApp } from '../../src/http/app';
import { assembleServices } from '../../src/main';
import type { MessagingProvider } from '../../src/ports/provider';
import type { RecordTransport } from '../../src/ports/transport';
import type { Services } from '../../src/services';
import { startWorkers, type Workers } from '../../src/workers';
import { createTestDatabase, type TestDatabase } from './db';

export const TEST_PEPPER = 'test-pepper-0123456789abcdef';
export const TEST_ANON_SECRET = 'test-anonymization-secret-0123456789';

export interface TestContext {
  db: TestDatabase;
  services: Services;
  /** stops workers, runner, store and drops the database */
  close(): Promise<void>;
}

export interface TestContextOptions {
  env?: Record<string, string>;
  transport?: RecordTransport;
  now?: () => Date;
  /** start the projection runner (default true) */
  runner?: boolean;
  /** start the workers of src/workers/index.ts (default false: tests start what they need) */
  workers?: boolean;
  /** a provider double; default: the sandbox from config (SANDBOX_DELIVERY=off unless env says auto) */
  provider?: MessagingProvider;
}

/** Real Postgres (a fresh database), the Postgres event store, in-process transport unless given. */
export async function createTestContext(options: TestContextOptions = {}): Promise<TestContext> {
  const db = await createTestDatabase({ poolSize: 20 });
  const config = loadConfig({
    DATABASE_URL: db.url,
    ANONYMIZATION_SECRET: TEST_ANON_SECRET,
    API_KEY_PEPPER: TEST_PEPPER,
    SANDBOX_DELIVERY: 'off',
    LOG_LEVEL: 'silent',
    PROVIDER_APP_SECRET: 'test-app-secret',
    PROVIDER_VERIFY_TOKEN: 'test-verify-token',
    ...options.env,
  });
  const pgStore = new PostgresEventStore(db.pool);
  const exportPool = createPool(db.url, config.export.maxConcurrent); // as main.ts wires it
  const transport = options.transport ?? new InProcessTransport();
  const services = assembleServices({
    config,
    secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER },
    pool: db.pool,
    exportPool,
    store: pgStore,
    transport,
    logger: pino({ level: 'silent' }),
    now: options.now,
    provider: options.provider,
  });
  if (options.runner === false) await services.runner.prepare();
  else await services.runner.start();
  let workers: Workers | undefined;
  if (options.workers) workers = await startWorkers(services, { role: 'serve' });
  return {
    db,
    services,
    async close() {
      await workers?.stop();
      await services.runner.stop();
      await services.provider.close?.();
      await transport.close();
      await services.store.close();
      await exportPool.end();
      await db.drop();
    },
  };
}

/** The fastify app on a test context (inject into it; no listening). */
export async function createTestApp(options: TestContextOptions = {}) {
  const ctx = await createTestContext(options);
  const app = await buildApp(ctx.services);
  await app.ready();
  return {
    ...ctx,
    app,
    async close() {
      await app.close();
      await ctx.close();
    },
  };
}
