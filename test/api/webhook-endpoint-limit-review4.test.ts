import pino from 'pino';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { createWebhookEndpoint, webhookEndpointDepsOf } from '../../src/commands/webhook-endpoint/handler';
import { buildApp } from '../../src/http/app';
import { assembleServices } from '../../src/main';
import { createTestApp, TEST_ANON_SECRET, TEST_PEPPER } from '../support/services';
import { OTHER, SHOP, sendsFixture } from '../support/sends';

// WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY across concurrent creations (docs/webhooks.md, "Endpoints API"): the decider
// checked a count of the read model read beforehand, so creations racing each other passed the limit by their number
// (reproduced: 12 concurrent POSTs at a limit of 3 registered 12). Now a company's creations take turns, in a process
// and across processes (a Postgres advisory lock per company), each counting the endpoints the one before made.

const BASE = '/api/v1/webhook-endpoints/';
const LIMIT = 3;
const ENV = { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true', WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: String(LIMIT) };
type App = Awaited<ReturnType<typeof createTestApp>>['app'];

let t: Awaited<ReturnType<typeof createTestApp>>;
/** a second process on the same database: its own pool, event store, projection runner and app */
let second: { app: App; services: typeof t.services; close(): Promise<void> };

beforeAll(async () => {
  t = await createTestApp({ env: ENV });
  await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  const pool = createPool(t.db.url, 20);
  const transport = new InProcessTransport();
  const services = assembleServices({
    config: t.services.config, secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER }, pool,
    store: new PostgresEventStore(pool), transport, logger: pino({ level: 'silent' }),
  });
  await services.runner.start();
  const app = await buildApp(services);
  await app.ready();
  second = {
    app,
    services,
    close: async () => {
      await app.close();
      await services.runner.stop();
      await transport.close();
      await services.store.close();
      await pool.end();
    },
  };
});
afterAll(async () => {
  await second?.close();
  await t?.close();
});

const create = (app: App, key: string, n: number, idempotencyKey?: string) => app.inject({
  method: 'POST', url: BASE, payload: { url: `https://hooks.example/in-${n}`, event_types: ['message.sent'] },
  headers: { 'x-api-key': key, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
});
const endpointsOf = async (key: string) => (await t.app.inject({ method: 'GET', url: BASE, headers: { 'x-api-key': key } })).json().results as Array<{ id: string }>;
const statuses = (answers: Array<{ statusCode: number }>) => answers.map((a) => a.statusCode).sort();

it('concurrent creations of one company in one process: as many as the limit are made, the others are 409', async () => {
  const answers = await Promise.all(Array.from({ length: 12 }, (_, n) => create(t.app, SHOP.key, n)));
  expect(statuses(answers)).toEqual([...Array(LIMIT).fill(201), ...Array(12 - LIMIT).fill(409)]);
  expect(answers.filter((a) => a.statusCode === 409).map((a) => a.json())).toEqual(
    Array(12 - LIMIT).fill({ error: `a company may have at most ${LIMIT} webhook endpoints: delete one it no longer uses first` }));
  expect((await endpointsOf(SHOP.key)).map((e) => e.id).sort()).toEqual(answers.filter((a) => a.statusCode === 201).map((a) => a.json().id).sort());
});

it('concurrent creations of one company in two processes: the limit holds across them', async () => {
  const answers = await Promise.all(Array.from({ length: 12 }, (_, n) => create(n % 2 === 0 ? t.app : second.app, OTHER.key, n)));
  expect(statuses(answers)).toEqual([...Array(LIMIT).fill(201), ...Array(12 - LIMIT).fill(409)]);
  expect(await endpointsOf(OTHER.key)).toHaveLength(LIMIT);
});

it('two processes creating the last endpoint at once: the second counts the first one\'s endpoint and is refused', async () => {
  // each creation, once appended, waits before its read model wait until the other has appended too, or waits for its
  // turn (an advisory lock not granted): without turns both count the same endpoints and both are made
  const company = 303;
  let appended = 0;
  const otherAppendedOrWaiting = async () => {
    appended++;
    for (;;) {
      const { rows: [w] } = await t.db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())");
      if (appended === 2 || w.n > 0) return;
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const processDeps = (services: typeof t.services) => {
    const deps = webhookEndpointDepsOf(services);
    return {
      ...deps,
      maxEndpointsPerCompany: 1,
      waiter: { waitForEvents: async (...args: Parameters<typeof deps.waiter.waitForEvents>) => {
        await otherAppendedOrWaiting();
        return deps.waiter.waitForEvents(...args);
      } },
    };
  };
  const input = { url: 'https://hooks.example/last', eventTypes: ['message.sent' as const], description: null };
  const outcomes = await Promise.allSettled([t.services, second.services].map((services) =>
    createWebhookEndpoint(processDeps(services), { actor: 'test', companyId: company }, input)));
  expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
  expect(outcomes.find((o) => o.status === 'rejected')).toMatchObject({ reason: { code: 'ENDPOINT_LIMIT' } });
  const { rows: [made] } = await t.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM rm_webhooks.endpoints WHERE company_id = $1', [company]);
  expect(made.n).toBe(1);
});

it('a keyed creation made (its answer lost) and run again among racing creations at the limit still answers its endpoint', async () => {
  const [gone] = await endpointsOf(SHOP.key);
  expect((await t.app.inject({ method: 'DELETE', url: `${BASE}${gone.id}/`, headers: { 'x-api-key': SHOP.key } })).statusCode).toBe(204);
  const made = await createWebhookEndpoint(webhookEndpointDepsOf(t.services), { actor: 'test', companyId: SHOP.companyId },
    { url: 'https://hooks.example/keyed', eventTypes: ['message.sent'], description: null }, 'made-before-the-race');
  const [retried, ...others] = await Promise.all([
    create(second.app, SHOP.key, 0, 'made-before-the-race'),
    ...Array.from({ length: 6 }, (_, n) => create(n % 2 === 0 ? t.app : second.app, SHOP.key, n + 1)),
  ]);
  expect([retried.statusCode, retried.json().id, retried.json().secret]).toEqual([201, made.endpointId, made.secret]);
  expect(statuses(others)).toEqual(Array(6).fill(409));
  expect(await endpointsOf(SHOP.key)).toHaveLength(LIMIT);
});
