import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import type { EventToAppend } from '../../src/ports/event-store';
import { START } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { SharedLogReader } from '../../src/workers/shared-log-reader';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { eventually, waitUntil } from '../support/sends';

// Regression review 21 (of 9e47a5a, the reads sized by their events): the runner's tail is trimmed when it holds more
// than 2 × RUNNER_READ_BYTES (4 MiB) of events, keeping the newest. When the tail held a single event of more than
// 4 MiB (a bulk chunk of one large recipient; a send-bulk body is up to 32 MiB), the trim dropped nothing and then
// read the position of the last dropped event: a TypeError on every read that extended that tail (an empty one at
// the head, each poll) until another event was appended. Every projection at the head failed its batch, was marked
// 'failing' and backed off (up to 5 s) meanwhile.

const ev = (type: string, data: unknown): EventToAppend => {
  const id = randomUUID();
  return { type, data, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: '2026-01-01T00:00:00.000Z' } };
};

const BIG = 5 * 1024 * 1024; // characters of one string in the event's data: above 2 × RUNNER_READ_BYTES

function tallyProjection(): Projection {
  return {
    name: 'tally21',
    version: 1,
    schema: 'rm_tally21',
    handles: ['Counted'],
    ddl: 'CREATE TABLE IF NOT EXISTS counts (stream text PRIMARY KEY, n integer NOT NULL)',
    async apply(tx: any, e: any) {
      await tx.query('INSERT INTO counts (stream, n) VALUES ($1, 1) ON CONFLICT (stream) DO UPDATE SET n = counts.n + 1', [e.streamId]);
    },
  } as Projection;
}

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
    const runner = new ProjectionRunner(db.pool, store, [tallyProjection()], { pollMs: 20, logger });
    await runner.prepare();
    await runner.start();
    try {
      const counts = async () => Object.fromEntries((await db.pool.query<{ stream: string; n: number }>('SELECT stream, n FROM rm_tally21.counts')).rows.map((r) => [r.stream, r.n]));
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
