import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import type { EventToAppend } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';
import { rebuildProjection } from '../../src/projections/rebuild';
import { readCheckpoint } from '../../src/projections/store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Found in review: `switchboard keys issue` run while `serve` rebuilt ratelimits after a version change (80,000
// events) took 59 s, the rest of that rebuild: the CLI's catch-up waited for every read model, the ones the command
// never reads included (and past 60 s it would have failed with READ_MODELS_BEHIND). `catchUp` now takes the read
// models a caller needs; the others' rebuild goes on without it.

const counted = (type: string): EventToAppend => {
  const id = randomUUID();
  return { type, data: {}, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: '2026-01-01T00:00:00.000Z' } };
};

const counter = (name: string, type: string, version: number): Projection => ({
  name, version, schema: `rm_${name}`, handles: [type],
  ddl: 'CREATE TABLE IF NOT EXISTS counts (stream text PRIMARY KEY, n integer NOT NULL)',
  async apply(tx, e) {
    await tx.query('INSERT INTO counts (stream, n) VALUES ($1, 1) ON CONFLICT (stream) DO UPDATE SET n = counts.n + 1', [e.streamId]);
  },
});

describe('catching up some read models while another one is rebuilt elsewhere', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    const before = new ProjectionRunner(db.pool, store, [counter('keys', 'KeyIssued', 1), counter('limits', 'LimitSet', 1)]);
    await before.prepare();
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('catches up the named ones without waiting for (or running) the rebuild of the others', async () => {
    const keys = counter('keys', 'KeyIssued', 1);
    const limits = counter('limits', 'LimitSet', 2); // a new version: rebuilt from zero, by another process here
    const elsewhere = await db.pool.connect();
    try {
      await elsewhere.query(`SELECT pg_advisory_lock(hashtext('rebuild:limits'))`); // that process's rebuild guard
      await store.append('limit-1', [counted('LimitSet')], 'no_stream');
      await store.append('key-1', [counted('KeyIssued')], 'no_stream');
      const runner = new ProjectionRunner(db.pool, store, [keys, limits]);

      await expect(runner.catchUp(Number.POSITIVE_INFINITY, [keys])).resolves.toBe(true);
      expect((await db.pool.query('SELECT stream, n FROM rm_keys.counts')).rows).toEqual([{ stream: 'key-1', n: 1 }]);
      expect(await readCheckpoint(db.pool, 'limits')).toMatchObject({ version: 1, position: '' }); // left to its rebuild

      // all of them (the default): behind the rebuild until the deadline
      await expect(runner.catchUp(Date.now() + 300)).resolves.toBe(false);
    } finally {
      await elsewhere.query('SELECT pg_advisory_unlock_all()');
      elsewhere.release();
    }
  });

  // Found with it: a rebuild that failed (an apply threw) recorded its error but left its partial tables behind.
  it('a failed rebuild records its error and drops its partial tables', async () => {
    const broken: Projection = { ...counter('keys', 'KeyIssued', 1), async apply() { throw new Error('apply refused'); } };
    await expect(rebuildProjection(db.pool, store, broken, {})).rejects.toThrow('apply refused');
    expect(await readCheckpoint(db.pool, 'keys')).toMatchObject({ state: 'running', error: 'rebuild failed: apply refused' });
    expect((await db.pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'rm_keys%' ORDER BY 1`)).rows).toEqual([{ nspname: 'rm_keys' }]);
  });
});
