// Review of API-key authentication (third pass): how long a revoked key keeps working, in the process that applied
// the revocation and in another process whose key cache learns of it through LISTEN/NOTIFY, including when that
// process's LISTEN connection is silently dead (a half-open TCP connection: no error, no notification, ever).
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import type { Pool } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { ApiKeyCache } from '../../src/http/api-key-cache';
import { registerAuth } from '../../src/http/auth';
import { registerErrorHandling } from '../../src/http/errors';
import type { EventToAppend } from '../../src/ports/event-store';
import { apiKeysProjection } from '../../src/projections/apikeys/projection';
import { hashApiKey, keyIdFromHash } from '../../src/shared/api-key';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { blackholeProxyFor } from '../support/blackhole-proxy';
import { createTestDatabase, type TestDatabase } from '../support/db';

const PEPPER = 'review3-pepper';
const NOW = () => new Date('2026-06-01T00:00:00Z');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const ev = (type: string, data: unknown): EventToAppend => {
  const id = randomUUID();
  return { type, data, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: '2026-01-01T00:00:00.000Z' } };
};

describe('revoked API keys (review 3)', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let runner: ProjectionRunner;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    runner = new ProjectionRunner(db.pool, store, [apiKeysProjection], { pollMs: 20 });
    await runner.start();
  });
  afterAll(async () => {
    await runner.stop();
    await store.close();
    await db.drop();
  });

  async function issue(key: string): Promise<string> {
    const keyHash = hashApiKey(PEPPER, key);
    const keyId = keyIdFromHash(keyHash);
    const r = await store.append(`apikey-${keyId}`, [ev('ApiKeyIssued', { keyId, scope: 'company', companyId: 1, userId: null, name: 'k', keyHash, expiresAt: null })], 'no_stream');
    await runner.waitFor(r.position);
    return keyId;
  }
  async function revoke(keyId: string): Promise<void> {
    const r = await store.append(`apikey-${keyId}`, [ev('ApiKeyRevoked', { keyId })], 0n);
    await runner.waitFor(r.position);
  }

  /** An app as a process builds it: registerAuth on its own pool. */
  async function appOn(pool: Pool, onKeysChanged?: (l: () => void) => () => void) {
    const app = Fastify();
    registerErrorHandling(app);
    registerAuth(app, { pool, pepper: PEPPER, prefix: 'sbk', now: NOW, onKeysChanged });
    app.get('/api/v1/whoami/', async (request) => ({ keyId: (await app.authenticate(request, 'company')).keyId }));
    await app.ready();
    return app;
  }

  it('in the process that applies the revocation the very next request is 401; in another process it is 401 once notified', async () => {
    const key = `sbk_rev3a${randomUUID().replace(/-/g, '')}`;
    const keyId = await issue(key);
    const otherPool = createPool(db.url, 4);
    const here = await appOn(db.pool, (l) => runner.onBatchCommitted((name) => name === apiKeysProjection.name && l()));
    const other = await appOn(otherPool);
    try {
      const whoami = (app: typeof here) => app.inject({ method: 'GET', url: '/api/v1/whoami/', headers: { 'x-api-key': key } });
      for (let i = 0; i < 3; i++) {
        expect((await whoami(here)).json()).toEqual({ keyId });
        expect((await whoami(other)).json()).toEqual({ keyId });
      }
      await revoke(keyId);
      const next = await whoami(here); // no wait: the runner's commit cleared this process's cache
      expect([next.statusCode, next.json()]).toEqual([401, { error: 'API key revoked' }]);
      let answer = await whoami(other);
      for (let i = 0; i < 1000 && answer.statusCode === 200; i++) {
        await sleep(5);
        answer = await whoami(other);
      }
      expect([answer.statusCode, answer.json()]).toEqual([401, { error: 'API key revoked' }]);
    } finally {
      await here.close();
      await other.close();
      await otherPool.end();
    }
  });

  it("a process whose LISTEN connection went silently dead stops accepting a revoked key after the cache's maximum age", async () => {
    const key = `sbk_rev3b${randomUUID().replace(/-/g, '')}`;
    const keyId = await issue(key);
    const hash = hashApiKey(PEPPER, key);
    const { proxy, url } = await blackholeProxyFor(db.url);
    const pool = createPool(url, 4);
    const cache = new ApiKeyCache(pool, { maxAgeMs: 200 });
    try {
      await cache.start(); // its LISTEN connection is the proxy's first
      expect(proxy.connections).toHaveLength(1);
      expect((await cache.lookup(hash))?.revoked).toBe(false);
      expect((await cache.lookup(hash))?.revoked).toBe(false); // cached
      proxy.connections[0].frozen = true; // the network drops the LISTEN connection's packets: no error, no FIN
      await revoke(keyId);
      let record = await cache.lookup(hash);
      for (let i = 0; i < 600 && record?.revoked === false; i++) {
        await sleep(5);
        record = await cache.lookup(hash);
      }
      expect(record?.revoked).toBe(true);
      expect(cache.active).toBe(true); // the listener never learned that its connection is gone
    } finally {
      await proxy.stop(); // the listener's connection ends now, so it can stop
      await cache.stop();
      await pool.end();
    }
  });
});
