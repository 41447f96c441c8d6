import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import type { EventToAppend, RecordedEvent } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';
import { rebuildProjection } from '../../src/projections/rebuild';
import { readCheckpoint } from '../../src/projections/store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Review (projections): two serve-like runtimes advancing the same projections on one database while appenders
// commit out of order (a transaction that took its id early commits late; some roll back) and the runners'
// connections are terminated mid-batch. Each projection records every event it applies by position, counting
// applications: at the end every event of the log is there exactly once (none skipped, none applied twice).

const ev = (type: string, data: unknown): EventToAppend => {
  const id = randomUUID();
  return { type, data, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: new Date().toISOString() } };
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Records each applied event by position with a count (not idempotent on purpose). */
function ledger(name: string, handles: string[], batch = false): Projection {
  const one = (tx: PoolClient, e: RecordedEvent) =>
    tx.query('INSERT INTO seen (pos, stream, n) VALUES ($1, $2, 1) ON CONFLICT (pos) DO UPDATE SET n = seen.n + 1', [e.position, e.streamId]);
  return {
    name,
    version: 1,
    schema: `rm_${name}`,
    handles,
    ddl: 'CREATE TABLE IF NOT EXISTS seen (pos text PRIMARY KEY, stream text NOT NULL, n integer NOT NULL)',
    apply: async (tx, e) => void (await one(tx, e)),
    ...(batch
      ? {
          applyBatch: async (tx: PoolClient, events: readonly RecordedEvent[]) => {
            await tx.query(
              `INSERT INTO seen (pos, stream, n) SELECT p, s, 1 FROM unnest($1::text[], $2::text[]) AS u(p, s)
                 ON CONFLICT (pos) DO UPDATE SET n = seen.n + 1`,
              [events.map((e) => e.position), events.map((e) => e.streamId)],
            );
          },
        }
      : {}),
  };
}

/** A pool whose backends' pids are known (to terminate them). */
function trackedPool(url: string, size: number): { pool: Pool; pids: Set<number> } {
  const pool = createPool(url, size);
  const pids = new Set<number>();
  pool.on('connect', (c) => pids.add((c as unknown as { processID: number }).processID));
  pool.on('remove', (c) => pids.delete((c as unknown as { processID: number }).processID));
  return { pool, pids };
}

describe('review: projections under two runtimes, late commits and killed connections', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 10 });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('every event applied exactly once by each projection (compared with the log)', async () => {
    const projections = () => [ledger('led_a', ['Counted']), ledger('led_b', ['Counted', 'Other'], true)];
    const appendPool = createPool(db.url, 8);
    const store = new PostgresEventStore(appendPool);
    const rt = [trackedPool(db.url, 6), trackedPool(db.url, 6)];
    const mk = (i: number) => new ProjectionRunner(rt[i].pool, new PostgresEventStore(rt[i].pool), projections(), { batchSize: 7, pollMs: 10 });
    let runners = [mk(0), mk(1)];
    for (const r of runners) await r.start();

    let going = true;
    let terminated = 0;
    const rebuilds: Promise<unknown>[] = [];
    const appenders = Array.from({ length: 3 }, (_, a) =>
      (async () => {
        for (let i = 0; going; i++) {
          const events = [ev(i % 3 === 0 ? 'Other' : 'Counted', {}), ev('Ignored', {})];
          await store.append(`s-${a}-${i % 5}`, events, 'any');
        }
      })(),
    );
    // late commits: a transaction takes its id, inserts, waits, then commits (or rolls back)
    const late = (async () => {
      for (let i = 0; going; i++) {
        const c = await appendPool.connect();
        try {
          await c.query('BEGIN');
          await c.query(
            `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
             VALUES ($1, 0, gen_random_uuid(), 'Counted', '{}', jsonb_build_object('eventId', gen_random_uuid(), 'at', now()::text))`,
            [`late-${i}`],
          );
          await sleep(5 + (i % 4) * 10);
          await c.query(i % 5 === 4 ? 'ROLLBACK' : 'COMMIT');
        } finally {
          c.release();
        }
      }
    })();
    let chaosRounds = 0;
    const chaos = (async () => {
      for (let i = 0; going; i++) {
        chaosRounds = i;
        await sleep(25);
        if (i === 60) {
          // an operator's `projections rebuild` of one of them, beside both runtimes (its pool is not terminated)
          rebuilds.push(rebuildProjection(appendPool, store, projections()[i % 2], { batchSize: 20 }));
        }
        const pids = [...rt[i % 2].pids];
        if (pids.length > 0) {
          const pid = pids[i % pids.length];
          const r = await db.pool.query('SELECT pg_terminate_backend($1) AS ok', [pid]).catch(() => ({ rows: [{ ok: false }] }));
          if (r.rows[0].ok) terminated++;
        }
        if (i % 40 === 39) {
          // a runtime restarts
          await runners[i % 2].stop();
          runners[i % 2] = mk(i % 2);
          await runners[i % 2].start();
        }
      }
    })();
    // at least 6 s, and at least past the chaos loop's rebuild (round 60) and two restarts, however slow the machine
    for (const until = Date.now() + 6000; Date.now() < until || chaosRounds < 81;) await sleep(50);
    going = false;
    await Promise.all([...appenders, late, chaos]);
    await Promise.all(rebuilds);
    expect(rebuilds.length).toBe(1);
    const head = await store.headPosition();
    await Promise.all(runners.map((r) => r.waitFor(head, r.projections, 30_000)));
    for (const r of runners) await r.stop();

    const log = await db.pool.query<{ pos: string; type: string }>(
      `SELECT tx_id || ':' || seq AS pos, type FROM es.events ORDER BY tx_id, seq`,
    );
    for (const [name, types] of [['led_a', ['Counted']], ['led_b', ['Counted', 'Other']]] as const) {
      const expected = log.rows.filter((r) => (types as readonly string[]).includes(r.type)).map((r) => r.pos).sort();
      const seen = await db.pool.query<{ pos: string; n: number }>(`SELECT pos, n FROM rm_${name}.seen ORDER BY pos`);
      const twice = seen.rows.filter((r) => r.n !== 1);
      expect({ name, twice }).toEqual({ name, twice: [] });
      expect({ name, positions: seen.rows.map((r) => r.pos).sort() }).toEqual({ name, positions: expected });
      expect((await readCheckpoint(db.pool, name))?.state).toBe('running');
    }
    expect(terminated).toBeGreaterThan(20);
    expect(log.rows.length).toBeGreaterThan(500);
    await Promise.all([appendPool.end(), ...rt.map((r) => r.pool.end())]);
  }, 120_000);
});
