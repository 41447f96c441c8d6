import pino from 'pino';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { loadConfig } from '../../src/config';
import { buildApp } from '../../src/http/app';
import { assembleServices } from '../../src/main';
import type { MessagingProvider } from '../../src/ports/provider';
import { TEST_ANON_SECRET, TEST_PEPPER } from './services';

/**
 * Another `serve` process on the same database, in this test process: its own pools, event store, runner, transport
 * and app, and its own clock (`now`) and provider when given (the clock-skew and quota-race suites).
 */
export async function anotherServeProcess(url: string, options: { now: () => Date; provider?: MessagingProvider; poolSize?: number }) {
  const pool = createPool(url, options.poolSize ?? 10);
  const exportPool = createPool(url, 2);
  const transport = new InProcessTransport();
  const config = loadConfig({
    DATABASE_URL: url, ANONYMIZATION_SECRET: TEST_ANON_SECRET, API_KEY_PEPPER: TEST_PEPPER, SANDBOX_DELIVERY: 'off', LOG_LEVEL: 'silent',
  });
  const services = assembleServices({
    config, secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER }, pool, exportPool,
    store: new PostgresEventStore(pool), transport, logger: pino({ level: 'silent' }), now: options.now,
    ...(options.provider ? { provider: options.provider } : {}),
  });
  await services.runner.start();
  const app = await buildApp(services);
  await app.ready();
  return {
    app,
    services,
    async close() {
      await app.close();
      await services.runner.stop();
      await transport.close();
      await services.store.close();
      await exportPool.end();
      await pool.end();
    },
  };
}
