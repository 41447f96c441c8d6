import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import type { EventToAppend } from '../../src/ports/event-store';
import { ReadModelTimeoutError } from '../../src/ports/read-models';
import type { Projection } from '../../src/projections/projection';
import { rebuildProjection } from '../../src/projections/rebuild';
import { readCheckpoint } from '../../src/projections/store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// A rebuild's replay while events keep being appended: it must end (swap, and let the live runner go on from
// there) however fast the log grows. And an automatic rebuild holds its own projection only.

const event = (type: string): EventToAppend => {
  const id = randomUUID();
  return { type, data: {}, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: '2026-01-01T00:00:00.000Z' } };
};

/** A deferred: a promise resolved from outside. */
function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

const inRebuild = async (tx: PoolClient, schema: string) =>
  (await tx.query<{ s: string }>('SELECT current_schema() AS s')).rows[0].s === `${schema}__next`;

describe('rebuild replay under constant appends', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let runner: ProjectionRunner | undefined;
  /** appends still allowed to the appender; it stops at 0 (without a bounded replay the rebuild ends only then) */
  let appendsLeft: number;

  /**
   * Counts `Counted` events per stream. Every event the rebuild replays has the log grow by one more (as fast as
   * the replay reads it): an appender the replay never catches up with.
   */
  const tally = (version: number): Projection => ({
    name: 'tally', version, schema: 'rm_tally', handles: ['Counted'],
    ddl: 'CREATE TABLE IF NOT EXISTS counts (stream text PRIMARY KEY, n integer NOT NULL)',
    async apply(tx, e) {
      if (appendsLeft > 0 && (await inRebuild(tx, 'rm_tally'))) {
        appendsLeft--;
        await store.append(`s-${randomUUID()}`, [event('Counted')], 'no_stream');
      }
      await tx.query('INSERT INTO counts (stream, n) VALUES ($1, 1) ON CONFLICT (stream) DO UPDATE SET n = counts.n + 1', [e.streamId]);
    },
  });

  beforeEach(async () => {
    db = await createTestDatabase({ poolSize: 20 });
    store = new PostgresEventStore(db.pool);
    for (let i = 0; i < 20; i++) await store.append(`s${i}`, [event('Counted')], 'no_stream');
    appendsLeft = 0;
    const setup = new ProjectionRunner(db.pool, store, [tally(1)]);
    await setup.prepare();
    await setup.catchUp();
    appendsLeft = 300;
  });
  afterEach(async () => {
    appendsLeft = 0;
    await runner?.stop();
    runner = undefined;
    await store.close();
    await db.drop();
  });

  /** Every event of the log counted exactly once in the live tables. */
  async function expectEachEventOnce(): Promise<void> {
    const logged = (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM es.events`)).rows[0].n;
    const live = (await db.pool.query<{ rows: number; total: number; most: number }>(
      'SELECT count(*)::int AS rows, sum(n)::int AS total, max(n) AS most FROM rm_tally.counts',
    )).rows[0];
    expect(live).toEqual({ rows: logged, total: logged, most: 1 });
  }

  it('`projections rebuild` beside a serving runner ends while appends go on; the runner goes on from the swap', async () => {
    const p = tally(1);
    runner = new ProjectionRunner(db.pool, store, [p], { pollMs: 10 });
    await runner.start();

    const result = await rebuildProjection(db.pool, store, p, { batchSize: 5 });
    const leftWhenSwapped = appendsLeft;
    appendsLeft = 0;

    expect(leftWhenSwapped).toBeGreaterThan(0); // the appender was still going: the rebuild did not wait for it
    expect(await readCheckpoint(db.pool, 'tally')).toMatchObject({ version: 1, state: 'running', error: null });
    expect(result.read).toBeLessThan(20 + 300);
    await runner.catchUp();
    await expectEachEventOnce();
  });

  it('a version change\'s rebuild in the runner ends while appends go on; the runner goes on from the swap', async () => {
    const p = tally(2);
    runner = new ProjectionRunner(db.pool, store, [p], { pollMs: 10 });
    await runner.start();

    let left: number | undefined;
    while ((await readCheckpoint(db.pool, 'tally'))?.version !== 2) {
      left = appendsLeft;
      await new Promise((r) => setTimeout(r, 5));
    }
    left = Math.min(left ?? appendsLeft, appendsLeft);
    appendsLeft = 0;

    expect(left).toBeGreaterThan(0);
    await runner.catchUp();
    await expectEachEventOnce();
    expect(await readCheckpoint(db.pool, 'tally')).toMatchObject({ version: 2, state: 'running', error: null });
  });
});

describe('an automatic rebuild in the runner', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 20 });
    store = new PostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('holds only its own projection: the others go on applying, their waiters answered', async () => {
    const projection = (name: string, type: string, version: number, paused?: { reached(): void; until: Promise<void> }): Projection => ({
      name, version, schema: `rm_${name}`, handles: [type],
      ddl: 'CREATE TABLE IF NOT EXISTS seen (event_id text PRIMARY KEY)',
      async apply(tx, e) {
        if (paused && (await inRebuild(tx, `rm_${name}`))) {
          paused.reached();
          await paused.until;
        }
        await tx.query('INSERT INTO seen (event_id) VALUES ($1) ON CONFLICT DO NOTHING', [e.metadata.eventId]);
      },
    });
    await store.append('a-0', [event('A')], 'no_stream');
    const before = new ProjectionRunner(db.pool, store, [projection('a', 'A', 1), projection('b', 'B', 1)]);
    await before.prepare();
    await before.catchUp();

    const reached = gate();
    const release = gate();
    const a = projection('a', 'A', 2, { reached: reached.open, until: release.opened });
    const b = projection('b', 'B', 1);
    const runner = new ProjectionRunner(db.pool, store, [a, b], { pollMs: 10 });
    await runner.start();
    try {
      await reached.opened; // a's rebuild is running in its loop, held in its first apply

      const forA = await store.append('a-1', [event('A')], 'no_stream');
      const forB = await store.append('b-1', [event('B')], 'no_stream');
      await runner.waitFor(forB.position, [b]);
      expect((await db.pool.query('SELECT count(*)::int AS n FROM rm_b.seen')).rows[0].n).toBe(1);
      await expect(runner.waitFor(forA.position, [a], 200)).rejects.toBeInstanceOf(ReadModelTimeoutError);

      release.open();
      await runner.waitFor(forA.position, [a]);
      expect((await db.pool.query('SELECT count(*)::int AS n FROM rm_a.seen')).rows[0].n).toBe(2);
    } finally {
      release.open();
      await runner.stop();
    }
  });
});
