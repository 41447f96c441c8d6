import pino from 'pino';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { createWebhookEndpoint, webhookEndpointDepsOf } from '../../src/commands/webhook-endpoint/handler';
import { assembleServices } from '../../src/main';
import { countWebhookEndpoints } from '../../src/projections/webhooks/queries';
import { createTestContext, TEST_ANON_SECRET, TEST_PEPPER } from '../support/services';

// Review 6 (regression of 5e732f8/e91fb7a): an endpoint creation holds a pooled connection for its company's session
// lock while it appends and waits for the read model, which take further connections of the same pool. Creations of
// as many different companies as the pool has connections take every connection for their locks and then wait for
// one another's: each fails after the pool's connectionTimeoutMillis (10 s). Before the turn, each creation held at
// most one connection at a time and all of them succeeded.

const POOL_MAX = 3;
jest.setTimeout(60_000);

let t: Awaited<ReturnType<typeof createTestContext>>;
let proc: { services: ReturnType<typeof assembleServices>; close(): Promise<void> };

beforeAll(async () => {
  t = await createTestContext({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
  const pool = createPool(t.db.url, POOL_MAX);
  const transport = new InProcessTransport();
  const services = assembleServices({
    config: t.services.config, secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER }, pool,
    store: new PostgresEventStore(pool), transport, logger: pino({ level: 'silent' }),
  });
  await services.runner.start();
  proc = {
    services,
    close: async () => {
      await services.runner.stop();
      await transport.close();
      await services.store.close();
      await pool.end();
    },
  };
});
afterAll(async () => {
  await proc?.close();
  await t?.close();
});

it(`${POOL_MAX} companies creating an endpoint at once on a pool of ${POOL_MAX} connections: every creation is made`, async () => {
  const deps = webhookEndpointDepsOf(proc.services);
  const outcomes = await Promise.allSettled(Array.from({ length: POOL_MAX }, (_, n) =>
    createWebhookEndpoint(deps, { actor: 'test', companyId: 601 + n }, { url: `https://hooks.example/c${n}`, eventTypes: ['message.sent'], description: null })));
  expect(outcomes.map((o) => (o.status === 'rejected' ? String((o.reason as Error).message) : 'made'))).toEqual(Array(POOL_MAX).fill('made'));
});

it('control: the same creations counting without the turn (as before e91fb7a) are all made on the same pool', async () => {
  const deps = { ...webhookEndpointDepsOf(proc.services),
    creationTurn: async <T>(companyId: number, create: (n: number) => Promise<T>) => create(await countWebhookEndpoints(proc.services.pool, companyId)) };
  const outcomes = await Promise.allSettled(Array.from({ length: POOL_MAX }, (_, n) =>
    createWebhookEndpoint(deps, { actor: 'test', companyId: 701 + n }, { url: `https://hooks.example/d${n}`, eventTypes: ['message.sent'], description: null })));
  expect(outcomes.map((o) => (o.status === 'rejected' ? String((o.reason as Error).message) : 'made'))).toEqual(Array(POOL_MAX).fill('made'));
});
