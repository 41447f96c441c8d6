import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import type { EventToAppend, RecordedEvent } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';
import { ensureProjection, lockKeyOf } from '../../src/projections/store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { waitUntil } from '../support/sends';

// Review 15 (several processes on one database): a process paused in the middle of a projection batch (SIGSTOP,
// `docker pause`, a VM freeze) held the projection's lock for as long as it stayed paused: no other process could
// apply that projection (their answered commands: 503 after 10 s), and every CLI command and process start waited
// in ensureProjection for the lock (12 minutes and more, found by the review's harness). Now Postgres ends a batch's
// transaction idle past the pools' idle_in_transaction_session_timeout (here 1 s, through the URL's options), and ensureProjection does not wait for the lock of a projection that
// exists.

const ev = (): EventToAppend => {
  const id = randomUUID();
  return { type: 'Counted', data: { id }, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: new Date().toISOString() } };
};

/** Records each applied event; `pauseOn` (an event id) makes the batch holding it wait until `resume` is called. */
function ledger(pause: { on?: string; reached?: () => void; until?: Promise<void> }): Projection {
  return {
    name: 'paused_ledger',
    version: 1,
    schema: 'rm_paused_ledger',
    handles: ['Counted'],
    ddl: 'CREATE TABLE IF NOT EXISTS seen (id text PRIMARY KEY)',
    async apply(tx: PoolClient, e: RecordedEvent) {
      const id = (e.data as { id: string }).id;
      if (id === pause.on) {
        pause.reached?.();
        await pause.until; // the process is paused here, its batch's transaction open and idle
      }
      await tx.query('INSERT INTO seen (id) VALUES ($1) ON CONFLICT DO NOTHING', [id]);
    },
  };
}

describe('review 15: a process paused inside a projection batch', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 6 });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('another process applies the projection once Postgres ends the paused batch, and the paused one recovers', async () => {
    const store = new PostgresEventStore(db.pool);
    let reached!: () => void;
    const pausedAt = new Promise<void>((r) => (reached = r));
    let resume!: () => void;
    const pause = { on: undefined as string | undefined, reached, until: new Promise<void>((r) => (resume = r)) };
    // the pools' 30 s, shortened as an operator could (the URL's options win over the pool's)
    const shortIdle = new URL(db.url);
    shortIdle.searchParams.set('options', '-c idle_in_transaction_session_timeout=1000');
    const pausedPool = createPool(shortIdle.toString(), 3);
    const otherPool = createPool(shortIdle.toString(), 3);
    const paused = new ProjectionRunner(pausedPool, new PostgresEventStore(pausedPool), [ledger(pause)], { pollMs: 20 });
    const other = new ProjectionRunner(otherPool, new PostgresEventStore(otherPool), [ledger({})], { pollMs: 20 });
    try {
      await paused.start();
      const first = ev();
      pause.on = (first.data as { id: string }).id;
      await store.append(`counted-${randomUUID()}`, [first], 'no_stream');
      await pausedAt; // the paused runner holds the projection's lock in an open, idle transaction

      await other.start(); // its start (ensureProjection) did not wait for that lock
      const later = ev();
      await store.append(`counted-${randomUUID()}`, [later], 'no_stream');
      // before the fix the paused batch's lock held the other runner off for as long as the pause lasted
      const seen = async () => (await db.pool.query<{ id: string }>('SELECT id FROM rm_paused_ledger.seen ORDER BY id')).rows.map((r) => r.id);
      await waitUntil(async () => (await seen()).length === 2, 20_000, 'the other process to apply both events');
      expect((await seen()).sort()).toEqual([(first.data as { id: string }).id, (later.data as { id: string }).id].sort());

      resume(); // the paused process wakes: its batch's session is gone, it fails, and it goes on from the checkpoint
      const again = ev();
      await store.append(`counted-${randomUUID()}`, [again], 'no_stream');
      await waitUntil(async () => (await seen()).length === 3, 20_000, 'the third event applied');
      await other.stop();
      const fourth = ev();
      const { position } = await store.append(`counted-${randomUUID()}`, [fourth], 'no_stream');
      await paused.waitFor(position, undefined, 20_000); // the resumed process applies alone again
      expect(await seen()).toHaveLength(4);
    } finally {
      resume();
      await paused.stop().catch(() => undefined);
      await other.stop().catch(() => undefined);
      await pausedPool.end();
      await otherPool.end();
    }
  }, 60_000);

  it("ensureProjection does not wait for the lock of a projection that exists", async () => {
    const p = ledger({});
    await ensureProjection(db.pool, p);
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockKeyOf(p.name)]);
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        ensureProjection(db.pool, p).then(() => 'done'),
        new Promise((r) => (timer = setTimeout(() => r('still waiting for the lock after 10 s'), 10_000))),
      ]);
      clearTimeout(timer);
      expect(outcome).toBe('done');
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
  }, 30_000);
});
