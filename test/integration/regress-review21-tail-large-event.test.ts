import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { START } from '../../src/ports/event-store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { SharedLogReader } from '../../src/workers/shared-log-reader';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { eventually, waitUntil } from '../support/sends';
import { tallyCounts, tallyProjection, testEvent } from '../support/tally-projection';

// Regression review 21 (of 9e47a5a, the reads sized by their events): the runner's tail is trimmed when it holds more
// than 2 × RUNNER_READ_BYTES (4 MiB) of events, keeping the newest. When the tail held a single event of more than
// 4 MiB (a bulk chunk of one large recipient; a send-bulk body is up to 32 MiB), the trim dropped nothing and then
// read the position of the last dropped event: a TypeError on every read that extended that tail (an empty one at
// the head, each poll) until another event was appended. Every projection at the head failed its batch, was marked
// 'failing' and backed off (up to 5 s) meanwhile.

const ev = testEvent;

const BIG = 5 * 1024 * 1024; // characters of one string in the event's data: above 2 × RUNNER_READ_BYTES

describe('regress-review21: a tail holding one event larger than its byte bound', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeEach(async () => {
    db = await createTestDatabase({ poolSize: 10 });
    store = new PostgresEventStore(db.pool);
    await store.append('small', [ev('Counted', { tag: 'small' })], 'any');
    await store.append('big', [ev('Counted', { tag: 'big', pad: 'x'.repeat(BIG) })], 'any');
    await eventually(async () => (await store.readAll(START, 10)).events.length, 2);
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  it('the shared reader reads on past the large event (an empty read at the head does not throw)', async () => {
    const reader = new SharedLogReader(store, 1000, 20);
    const sizing = { size: 1 };
    const first = await reader.readShared(START, sizing);
    expect(first.batch.events.map((e) => e.streamId)).toEqual(['small']);
    const second = await reader.readShared(first.batch.nextPosition, sizing);
    expect(second.batch.events.map((e) => e.streamId)).toEqual(['big']);
    // the tail now holds the large event alone; reading at the head extends it with an empty read
    const third = await reader.readShared(second.batch.nextPosition, sizing);
    expect(third.batch.events).toEqual([]);
    // and a later append is read after it
    await store.append('after', [ev('Counted', { tag: 'after' })], 'any');
    const fourth = await waitUntil(async () => {
      const r = await reader.readShared(second.batch.nextPosition, sizing);
      return r.batch.events.length > 0 && r;
    });
    expect(fourth.batch.events.map((e) => e.streamId)).toEqual(['after']);
  });

  it('the runner applies each event once and fails no batch', async () => {
    const errors: unknown[] = [];
    const logger = { info: () => undefined, warn: () => undefined, error: (o: object) => { errors.push(o); } } as any;
    const runner = new ProjectionRunner(db.pool, store, [tallyProjection({ name: 'tally21' })], { pollMs: 20, logger });
    await runner.prepare();
    await runner.start();
    try {
      const counts = () => tallyCounts(db.pool, 'tally21');
      await eventually(counts, { small: 1, big: 1 });
      await store.append('after', [ev('Counted', { tag: 'after' })], 'any');
      await eventually(counts, { small: 1, big: 1, after: 1 });
      const state = await db.pool.query<{ state: string }>(`SELECT state FROM projections.checkpoints WHERE name = 'tally21'`);
      expect(state.rows[0].state).not.toBe('failing');
      expect(errors.map((e) => String((e as { err?: Error }).err?.message ?? e))).toEqual([]);
    } finally {
      await runner.stop();
    }
  });
});
