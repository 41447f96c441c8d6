import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { registerAuth } from '../../src/http/auth';
import { registerErrorHandling } from '../../src/http/errors';
import type { EventToAppend } from '../../src/ports/event-store';
import { apiKeysProjection } from '../../src/projections/apikeys/projection';
import { hashApiKey, keyIdFromHash } from '../../src/shared/api-key';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

const ev = (type: string, data: unknown): EventToAppend => {
  const id = randomUUID();
  return { type, data, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: '2026-01-01T00:00:00.000Z' } };
};

describe('API key cache', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let runner: ProjectionRunner;
  let queries = 0;
  const pepper = 'cache-pepper';
  const key = 'sbk_cachetest0123456789abcdef';
  const keyHash = hashApiKey(pepper, key);
  const keyId = keyIdFromHash(keyHash);
  const app = Fastify();

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    runner = new ProjectionRunner(db.pool, store, [apiKeysProjection], { pollMs: 20 });
    await runner.start();
    const countingPool = new Proxy(db.pool, {
      get(target, prop, receiver) {
        if (prop === 'query') return (...args: unknown[]) => { if (String(args[0]).includes('rm_apikeys.keys')) queries++; return (target.query as any)(...args); };
        return Reflect.get(target, prop, receiver);
      },
    });
    registerErrorHandling(app);
    registerAuth(app, { pool: countingPool, pepper, prefix: 'sbk', now: () => new Date('2026-06-01T00:00:00Z') });
    app.get('/whoami', async (request) => ({ name: (await app.authenticate(request, 'any')).name }));
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await runner.stop();
    await store.close();
    await db.drop();
  });

  const whoami = () => app.inject({ method: 'GET', url: '/whoami', headers: { 'x-api-key': key } });

  async function eventually(status: number): Promise<number> {
    for (let i = 0; i < 500; i++) {
      const res = await whoami();
      if (res.statusCode === status) return i;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`never answered ${status}`);
  }

  it('caches a key after the first lookup, sees a newly issued key, and refuses a revoked one', async () => {
    expect((await whoami()).statusCode).toBe(401); // unknown (and cached as unknown)
    const issued = await store.append(`apikey-${keyId}`, [ev('ApiKeyIssued', { keyId, scope: 'company', companyId: 1, userId: null, name: 'cached', keyHash, expiresAt: null })], 'no_stream');
    await runner.waitFor(issued.position);
    await eventually(200); // the miss was invalidated by the notification
    const before = queries;
    for (let i = 0; i < 20; i++) expect((await whoami()).json()).toEqual({ name: 'cached' });
    expect(queries).toBe(before); // served from the cache

    const revoked = await store.append(`apikey-${keyId}`, [ev('ApiKeyRevoked', { keyId })], 0n);
    await runner.waitFor(revoked.position);
    await eventually(401);
    expect((await whoami()).json()).toEqual({ error: 'API key revoked' });
  });

  it('checks expiry on every request, also for a cached key', async () => {
    const k2 = 'sbk_cacheexpiry0123456789abcd';
    const h2 = hashApiKey(pepper, k2);
    const id2 = keyIdFromHash(h2);
    const r = await store.append(`apikey-${id2}`, [ev('ApiKeyIssued', { keyId: id2, scope: 'company', companyId: 1, userId: null, name: 'exp', keyHash: h2, expiresAt: '2026-05-31T00:00:00Z' })], 'no_stream');
    await runner.waitFor(r.position);
    const res = await app.inject({ method: 'GET', url: '/whoami', headers: { 'x-api-key': k2 } });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'API key expired' });
  });
});
