import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import type { Position } from '../../src/ports/event-store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { waitUntil } from '../support/sends';
import { tallyCounts, tallyProjection, testEvent } from '../support/tally-projection';

// Regression review 21 (of 9e47a5a, reads sized by their events): several projections share the runner's tail while
// writers append events of very different sizes (so each projection's read size and the tail's change all the time,
// and the tail is trimmed by bytes while projections are behind it), some committing late (readAll holds back the
// events after an open transaction's), with read-your-writes waits kicking the runner. Each projection must apply
// every event exactly once.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rnd = (n: number) => Math.floor(Math.random() * n);

const ev = (data: unknown) => testEvent('Counted', data);

describe('regress-review21: sized reads under concurrent writers and late commits', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 30 });
    store = new PostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('each projection applies each event once', async () => {
    const names = ['t21a', 't21b', 't21c'];
    const runner = new ProjectionRunner(db.pool, store, names.map((name) => tallyProjection({ name })), { pollMs: 30, batchSize: 8 });
    await runner.prepare();
    await runner.start();
    const streams: string[] = [];
    let last: Position | undefined;
    try {
      const writer = async (w: number) => {
        for (let i = 0; i < 40; i++) {
          const large = rnd(5) === 0; // ~700 KB: a few fill the runner's 2 MiB read, and the tail's 4 MiB bound
          const stream = `w${w}-${i}`;
          const data = { w, i, pad: large ? 'x'.repeat(700_000 + rnd(100_000)) : 'y'.repeat(rnd(200)) };
          if (rnd(4) === 0) {
            // a late commit: the event written first, committed after others' (readAll holds the log back meanwhile)
            const c = await db.pool.connect();
            try {
              await c.query('BEGIN');
              const id = randomUUID();
              await c.query(`INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ($1, 0, $2, 'Counted', $3, $4)`, [
                stream, id, data, ev({}).metadata,
              ]);
              await sleep(rnd(120));
              await c.query('COMMIT');
            } finally {
              c.release();
            }
          } else {
            const r = await store.append(stream, [ev(data)], 'no_stream');
            last = r.position as Position;
            // read-your-writes now and then: kicks the runner while others are behind
            if (rnd(3) === 0) await runner.waitForEvents(last, ['Counted'], 30_000);
          }
          streams.push(stream);
        }
      };
      await Promise.all([0, 1, 2, 3, 4].map(writer));
      const expected = Object.fromEntries(streams.map((s) => [s, 1]));
      for (const name of names) {
        const counts = () => tallyCounts(db.pool, name);
        const got = await waitUntil(async () => {
          const c = await counts();
          return Object.keys(c).length >= streams.length && c;
        }, 60_000, `${name} to apply ${streams.length} events`);
        expect(got).toEqual(expected);
      }
    } finally {
      await runner.stop();
    }
  }, 120_000);
});
