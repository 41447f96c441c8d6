import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import type { EventToAppend, RecordedEvent } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';
import { rebuildProjection } from '../../src/projections/rebuild';
import { readCheckpoint } from '../../src/projections/store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Review (projections): a rebuild whose guard connection is lost mid-replay (terminated by an operator, a proxy's
// idle timeout, a network blip that ends that one backend) while its other statements go on through the pool on new
// connections. The guard's lock went with that backend, so another process may start a rebuild of the same
// projection into the same `<schema>__next`: the first must not swap in tables the two filled together.

const ev = (type: string): EventToAppend => {
  const id = randomUUID();
  return { type, data: {}, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: new Date().toISOString() } };
};

const ledger = (): Projection => ({
  name: 'ledger',
  version: 1,
  schema: 'rm_ledger',
  handles: ['Counted'],
  ddl: 'CREATE TABLE IF NOT EXISTS seen (pos text PRIMARY KEY, n integer NOT NULL)',
  async apply(tx: PoolClient, e: RecordedEvent) {
    await tx.query('INSERT INTO seen (pos, n) VALUES ($1, 1) ON CONFLICT (pos) DO UPDATE SET n = seen.n + 1', [e.position]);
  },
});

/** The backend holding the rebuild guard of `name` (a session advisory lock on hashtext('rebuild:<name>')). */
async function guardHolder(db: TestDatabase, name: string): Promise<number | undefined> {
  const r = await db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND ((classid::bigint << 32) | objid::bigint) = hashtext($1)::bigint`,
    [`rebuild:${name}`],
  );
  return r.rows[0]?.pid;
}

describe('review: a rebuild that lost its guard', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 10 });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('does not swap in tables a second rebuild wrote to: the live read model equals the log', async () => {
    const store = new PostgresEventStore(db.pool);
    for (let i = 0; i < 60; i++) await store.append(`s-${i}`, Array.from({ length: 50 }, () => ev(i % 2 ? 'Counted' : 'Other')), 'no_stream');
    const p = ledger();
    const runner = new ProjectionRunner(db.pool, store, [p]);
    await runner.prepare();
    await runner.catchUp();

    const poolA = createPool(db.url, 4);
    const poolB = createPool(db.url, 4);
    let second: Promise<unknown> | undefined;
    let killed = false;
    const first = rebuildProjection(poolA, new PostgresEventStore(poolA), p, {
      batchSize: 50,
      onProgress: (r) => {
        if (killed || r.read < 800) return;
        killed = true;
        // the guard's backend ends; a second process then starts the same rebuild (its guard is free)
        second = (async () => {
          const pid = await guardHolder(db, 'ledger');
          await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
          while ((await guardHolder(db, 'ledger')) !== undefined) await new Promise((res) => setTimeout(res, 5));
          return rebuildProjection(poolB, new PostgresEventStore(poolB), p, { batchSize: 50 });
        })();
      },
    });
    const outcomes = await Promise.allSettled([first, (async () => {
      while (!second) await new Promise((res) => setTimeout(res, 5));
      return second;
    })()]);
    expect(killed).toBe(true);
    expect(outcomes.some((o) => o.status === 'fulfilled')).toBe(true); // one of them swapped

    const expected = (await db.pool.query<{ pos: string }>(`SELECT tx_id || ':' || seq AS pos FROM es.events WHERE type = 'Counted' ORDER BY 1`)).rows.map((r) => r.pos);
    const seen = await db.pool.query<{ pos: string; n: number }>('SELECT pos, n FROM rm_ledger.seen ORDER BY pos');
    expect(seen.rows.filter((r) => r.n !== 1)).toEqual([]);
    expect(seen.rows.map((r) => r.pos)).toEqual(expected);
    expect((await readCheckpoint(db.pool, 'ledger'))?.state).toBe('running');
    const schemas = await db.pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'rm_ledger%' ORDER BY 1`);
    expect(schemas.rows.map((r) => r.nspname)).toEqual(['rm_ledger']);
    await Promise.all([poolA.end(), poolB.end(), store.close()]);
  });
});
