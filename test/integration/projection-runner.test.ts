import Fastify from 'fastify';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { registerAuth } from '../../src/http/auth';
import { registerErrorHandling } from '../../src/http/errors';
import { apiKeysProjection } from '../../src/projections/apikeys/projection';
import { checksumProjection, rebuildProjection } from '../../src/projections/rebuild';
import { readCheckpoint } from '../../src/projections/store';
import { hashApiKey, keyIdFromHash } from '../../src/shared/api-key';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { tallyCounts, tallyProjection, testEvent } from '../support/tally-projection';

const ev = testEvent;
const counts = (db: TestDatabase): Promise<Record<string, number>> => tallyCounts(db.pool);

describe('projection runner', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeEach(async () => {
    db = await createTestDatabase({ poolSize: 15 });
    store = new PostgresEventStore(db.pool);
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  it('applies each event once and stores the checkpoint in the same transaction; a failed batch is retried whole', async () => {
    for (let i = 0; i < 30; i++) await store.append(`s-${i % 3}`, [ev('Counted', { tag: `t${i}` }), ev('Ignored', {})], 'any');
    const tally = tallyProjection({ failOnce: 't17' });
    const runner = new ProjectionRunner(db.pool, store, [tally], { batchSize: 7 });
    await runner.prepare();
    // Drive batches by hand: the batch containing t17 fails and rolls back (no partial counts, no checkpoint).
    // An empty batch ends the loop only at the head: another test's open transaction may hold readers back a moment.
    const head = await store.headPosition();
    let failures = 0;
    for (let i = 0; i < 2000; i++) {
      try {
        if ((await runner.runBatch(tally)) === 0) {
          if ((await readCheckpoint(db.pool, 'tally'))?.position === head) break;
          await new Promise((r) => setTimeout(r, 5));
        }
      } catch {
        failures++;
      }
    }
    expect(failures).toBe(1);
    expect(await counts(db)).toEqual({ 's-0': 10, 's-1': 10, 's-2': 10 });
    const cp = await readCheckpoint(db.pool, 'tally');
    expect(cp?.position).toBe(await store.headPosition());
    // A redelivered batch from an older checkpoint would double count; the runner never re-reads past its checkpoint.
    expect(await runner.runBatch(tally)).toBe(0);
    expect(await counts(db)).toEqual({ 's-0': 10, 's-1': 10, 's-2': 10 });
  });

  it('lets exactly one of several processes advance a projection at a time (advisory lock): nothing applied twice', async () => {
    const pools = [createPool(db.url, 5), createPool(db.url, 5), createPool(db.url, 5)];
    const runners = pools.map((p) => new ProjectionRunner(p, new PostgresEventStore(p), [tallyProjection()], { batchSize: 5, pollMs: 5 }));
    try {
      for (const r of runners) await r.start();
      const appends = [];
      for (let i = 0; i < 200; i++) appends.push(store.append(`m-${i % 4}`, [ev('Counted', { tag: String(i) })], 'any'));
      const results = await Promise.all(appends);
      const last = results.map((r) => r.position).sort((a, b) => store.comparePositions(a, b)).at(-1)!;
      await Promise.all(runners.map((r) => r.waitFor(last)));
      expect(await counts(db)).toEqual({ 'm-0': 50, 'm-1': 50, 'm-2': 50, 'm-3': 50 });
    } finally {
      for (const r of runners) await r.stop();
      for (const p of pools) await p.end();
    }
  });

  it("a batch's commit opens the next batch's transaction when more events wait: each applied once, nothing left open", async () => {
    let last = '';
    for (let i = 0; i < 60; i++) last = (await store.append(`p-${i % 3}`, [ev('Counted', { tag: String(i) })], 'any')).position;
    const pool = createPool(db.url, 5);
    const sent: string[] = [];
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      client.query = ((...args: unknown[]) => {
        if (typeof args[0] === 'string') sent.push(args[0]);
        return query(...args);
      }) as typeof client.query;
    });
    // two projections reading the same tail: each finds it extended by the other's reads after some of its batches
    const runner = new ProjectionRunner(pool, new PostgresEventStore(pool), [tallyProjection(), tallyProjection({ name: 'tally_too' })], { batchSize: 3, pollMs: 20 });
    const openTransactions = async () =>
      Number((await db.pool.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`)).rows[0].n);
    try {
      await runner.start();
      await runner.waitFor(last as never);
      expect(await counts(db)).toEqual({ 'p-0': 20, 'p-1': 20, 'p-2': 20 });
      const tooCounts = await db.pool.query<{ stream: string; n: number }>('SELECT stream, n FROM rm_tally_too.counts ORDER BY stream');
      expect(tooCounts.rows).toEqual([{ stream: 'p-0', n: 20 }, { stream: 'p-1', n: 20 }, { stream: 'p-2', n: 20 }]);
      const commits = sent.filter((q) => q.startsWith('UPDATE projections.checkpoints SET position') && q.includes('COMMIT'));
      const openedAlone = sent.filter((q) => /^BEGIN;/.test(q));
      const openedByCommit = commits.filter((q) => q.includes('COMMIT; BEGIN;'));
      // 60 events, at most 3 per batch, two projections: 40 batches when every read finds 3; more when a read stops
      // short (reads stop below the oldest transaction running in the cluster, and the test databases share one)
      expect(commits.length).toBeGreaterThanOrEqual(40);
      expect(commits.length).toBeLessThanOrEqual(120);
      expect(openedByCommit.length).toBeGreaterThan(0);
      expect(openedAlone.length + openedByCommit.length).toBe(commits.length + sent.filter((q) => q === 'ROLLBACK').length);
      expect(await openTransactions()).toBe(0); // the last batch opened no next one
      const advisoryLocks = await db.pool.query(
        `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`);
      expect(advisoryLocks.rows[0].n).toBe('0'); // (other test files' databases may hold theirs meanwhile)
    } finally {
      await runner.stop();
      await pool.end();
    }
    expect(await openTransactions()).toBe(0);
  });

  it('waitFor resolves once the read model shows the write (read-your-writes)', async () => {
    const runner = new ProjectionRunner(db.pool, store, [tallyProjection()], { pollMs: 1000 });
    await runner.start();
    try {
      const r = await store.append('ryw', [ev('Counted', { tag: 'x' })], 'no_stream');
      await runner.waitFor(r.position);
      expect(await counts(db)).toEqual({ ryw: 1 });
      await expect(runner.waitForEvents(undefined, ['Counted'])).resolves.toBeUndefined();
      expect(runner.affectedBy(['Counted']).map((p) => p.name)).toEqual(['tally']);
      expect(runner.affectedBy(['Other'])).toEqual([]);
    } finally {
      await runner.stop();
    }
  });

  it('rebuilds while requests are served: identical contents (checksum), no failed request during the swap', async () => {
    const pepper = 'rebuild-pepper';
    const keys: string[] = [];
    for (let i = 0; i < 400; i++) {
      const key = `sbk_rebuild${String(i).padStart(6, '0')}xxxxxxxxxx`;
      keys.push(key);
      const keyHash = hashApiKey(pepper, key);
      const keyId = keyIdFromHash(keyHash);
      await store.append(`apikey-${keyId}`, [ev('ApiKeyIssued', { keyId, scope: 'company', companyId: 1 + (i % 5), userId: null, name: `key ${i}`, keyHash, expiresAt: null })], 'no_stream');
      if (i % 10 === 0) await store.append(`apikey-${keyId}`, [ev('ApiKeyRevoked', { keyId })], 0n);
    }
    const runner = new ProjectionRunner(db.pool, store, [apiKeysProjection], { pollMs: 20 });
    await runner.start();
    await runner.catchUp();
    const before = await checksumProjection(db.pool, apiKeysProjection);

    const app = Fastify();
    registerErrorHandling(app);
    registerAuth(app, { pool: db.pool, pepper, prefix: 'sbk', now: () => new Date('2026-06-01T00:00:00Z') });
    app.get('/whoami', async (request) => ({ name: (await app.authenticate(request, 'any')).name }));
    await app.ready();

    let serving = true;
    const statuses: number[] = [];
    const load = (async () => {
      let i = 1;
      while (serving) {
        const res = await app.inject({ method: 'GET', url: '/whoami', headers: { 'x-api-key': keys[i] } });
        statuses.push(res.statusCode);
        if (res.statusCode !== 200 || res.json().name !== `key ${i}`) throw new Error(`request failed during rebuild: ${res.statusCode} ${res.body}`);
        await new Promise((r) => setImmediate(r)); // cached auth does no I/O: let the rebuild's queries run
        i++;
        if (i >= keys.length) i = 1;
        if (i % 10 === 0) i++; // every tenth key is revoked
      }
    })();
    try {
      const result = await rebuildProjection(db.pool, store, apiKeysProjection, {});
      expect(result.read).toBe(440);
      // keep serving for a moment after the swap too
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      serving = false;
      await load;
      await app.close();
      await runner.stop();
    }
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(await checksumProjection(db.pool, apiKeysProjection)).toBe(before);
    const cp = await readCheckpoint(db.pool, 'apikeys');
    expect(cp?.state).toBe('running');
    const schemas = await db.pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'rm_apikeys%' ORDER BY 1`);
    expect(schemas.rows.map((r) => r.nspname)).toEqual(['rm_apikeys']);
  });

  it('rebuilds a projection automatically when its version changes', async () => {
    await store.append('v', [ev('Counted', { tag: 'a' }), ev('Counted', { tag: 'b' })], 'no_stream');
    const v1 = tallyProjection();
    const r1 = new ProjectionRunner(db.pool, store, [v1]);
    await r1.prepare();
    await r1.catchUp();
    await db.pool.query('UPDATE rm_tally.counts SET n = 99'); // stale data the rebuild must replace
    const v2 = { ...tallyProjection(), version: 2 };
    const r2 = new ProjectionRunner(db.pool, store, [v2]);
    await r2.prepare();
    await r2.runBatch(v2);
    expect(await counts(db)).toEqual({ v: 2 });
    expect((await readCheckpoint(db.pool, 'tally'))?.version).toBe(2);
  });
});

describe('projection runner: events a projection does not handle', () => {
  it('reads past them without a write per batch, and persists the checkpoint within a second', async () => {
    const db = await createTestDatabase();
    const store = new PostgresEventStore(db.pool);
    const tally = tallyProjection();
    const runner = new ProjectionRunner(db.pool, store, [tally], { batchSize: 5 });
    try {
      await runner.prepare();
      const r = await store.append('other', Array.from({ length: 12 }, () => ev('Ignored', {})), 'no_stream');
      await runner.catchUp(); // reads until it passes the newest event (waiting if another transaction holds readers back)
      await runner.waitFor(r.position, [tally]); // passed in memory...
      expect((await readCheckpoint(db.pool, 'tally'))?.position).toBe(''); // ...nothing written yet
      await new Promise((res) => setTimeout(res, 1100));
      await runner.runBatch(tally);
      expect((await readCheckpoint(db.pool, 'tally'))?.position).toBe(r.position);
      // a handled event after skipped ones is applied, and the checkpoint moves with it
      const c = await store.append('counted', [ev('Counted', { tag: 'x' })], 'no_stream');
      await runner.catchUp();
      expect(await counts(db)).toEqual({ counted: 1 });
      expect((await readCheckpoint(db.pool, 'tally'))?.position).toBe(c.position);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
