import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import type { EventToAppend } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';
import { readCheckpoint } from '../../src/projections/store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Two processes run the new version of a projection: one rebuilds it, the other must neither disturb that
// rebuild nor repeat it.

const counted = (): EventToAppend => {
  const id = randomUUID();
  return { type: 'Counted', data: {}, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: '2026-01-01T00:00:00.000Z' } };
};

/** A deferred: a promise resolved from outside. */
function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('projection version change seen by two processes', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let applies: number;
  let inProgress: { finish(): Promise<void> } | undefined;

  /** Counts every apply; `paused` holds the first apply until it opens (a rebuild caught in the middle). */
  const tally = (version: number, paused?: { reached: () => void; until: Promise<void> }): Projection => ({
    name: 'tally', version, schema: 'rm_tally', handles: ['Counted'],
    ddl: 'CREATE TABLE IF NOT EXISTS counts (stream text PRIMARY KEY, n integer NOT NULL)',
    async apply(tx, e) {
      if (paused && applies === 0) {
        paused.reached();
        await paused.until;
      }
      applies++;
      await tx.query('INSERT INTO counts (stream, n) VALUES ($1, 1) ON CONFLICT (stream) DO UPDATE SET n = counts.n + 1', [e.streamId]);
    },
  });

  beforeEach(async () => {
    db = await createTestDatabase({ poolSize: 20 });
    store = new PostgresEventStore(db.pool);
    for (let i = 0; i < 20; i++) await store.append(`s${i}`, [counted()], 'no_stream');
    const v1 = tally(1);
    const runner = new ProjectionRunner(db.pool, store, [v1]);
    await runner.prepare();
    await runner.catchUp();
    applies = 0;
  });
  afterEach(async () => {
    await inProgress?.finish();
    inProgress = undefined;
    await store.close();
    await db.drop();
  });

  /** Process A's rebuild to version 2, held in its first apply until `finish` is called. */
  async function rebuildInProgress(): Promise<{ finish(): Promise<void> }> {
    const reached = gate();
    const release = gate();
    const a = tally(2, { reached: reached.open, until: release.opened });
    const running = new ProjectionRunner(db.pool, store, [a]).runBatch(a);
    await reached.opened;
    inProgress = {
      async finish() {
        release.open();
        await running;
      },
    };
    return inProgress;
  }

  const total = async () => (await db.pool.query<{ n: number }>('SELECT sum(n)::int AS n FROM rm_tally.counts')).rows[0].n;

  it('the process that finds the rebuild running waits, leaves its state alone, and does not rebuild again after it', async () => {
    const a = await rebuildInProgress();
    const b = tally(2);
    const runnerB = new ProjectionRunner(db.pool, store, [b]);

    await expect(runnerB.runBatch(b)).resolves.toBe(-1); // held elsewhere: no error, nothing to log or mark failing
    expect(await readCheckpoint(db.pool, 'tally')).toMatchObject({ version: 1, state: 'rebuilding', error: null });

    await a.finish();
    await expect(runnerB.runBatch(b)).resolves.toBe(0);
    expect(applies).toBe(20);
    expect(await readCheckpoint(db.pool, 'tally')).toMatchObject({ version: 2, state: 'running', error: null });
    expect(await total()).toBe(20);
  });

  it('the process that read the old version before the swap finds it current under the guard lock', async () => {
    const a = await rebuildInProgress();
    // B reads the checkpoint (version 1) and asks for its guard's connection, which it gets only once A is done
    const asked = gate();
    const aDone = gate();
    const b = tally(2);
    const runnerB = new ProjectionRunner(connectAfter(db.pool, asked.open, aDone.opened), store, [b]);
    const batchB = runnerB.runBatch(b);
    await asked.opened;

    await a.finish();
    aDone.open();
    await expect(batchB).resolves.toBe(0);
    expect(applies).toBe(20);
    expect(await readCheckpoint(db.pool, 'tally')).toMatchObject({ version: 2, state: 'running', error: null });
    expect(await total()).toBe(20);
  });
});

/**
 * The pool, whose `connect()` (a connection held across statements, as the rebuild's guard) reports the request
 * and waits for `opened`; its own queries connect at once.
 */
function connectAfter(pool: Pool, requested: () => void, opened: Promise<void>): Pool {
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === 'connect') {
        return () => {
          requested();
          return opened.then(() => target.connect());
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
