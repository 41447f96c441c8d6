import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { DuplicateEventIdError, type EventToAppend, WrongExpectedRevisionError } from '../../src/ports/event-store';
import { createTestDatabase } from '../support/db';
import { describeEventStoreContract } from './event-store-contract';

describeEventStoreContract('postgres', async () => {
  const db = await createTestDatabase({ poolSize: 12 });
  const store = new PostgresEventStore(db.pool);
  return {
    store,
    cleanup: async () => {
      await store.close();
      await db.drop();
    },
  };
});

describe('postgres event store: late commits', () => {
  it('does not let readAll pass an event whose transaction commits after a later one', async () => {
    const db = await createTestDatabase();
    const store = new PostgresEventStore(db.pool);
    try {
      const slow = await db.pool.connect();
      await slow.query('BEGIN');
      // The slow transaction takes its sequence value (and transaction id) first, then commits last.
      await slow.query(
        `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
         VALUES ('late-1', 0, gen_random_uuid(), 'Late', '{}', '{"eventId":"x"}')`,
      );
      await store.append('fast-1', [{ type: 'Fast', data: {}, metadata: { eventId: '00000000-0000-4000-8000-000000000001', correlationId: 'c', causationId: null, companyId: null, actor: 'test', at: '1970-01-01T00:00:00.000Z' } }], 'no_stream');
      const before = await store.readAll('' as never, 100);
      expect(before.events.map((e) => e.type)).toEqual([]); // the fast one waits behind the open transaction
      await slow.query('COMMIT');
      slow.release();
      // Other test files share this server, and their open transactions may hold readers back a moment too.
      let after = await store.readAll(before.nextPosition, 100);
      for (let i = 0; i < 2000 && after.events.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 5));
        after = await store.readAll(before.nextPosition, 100);
      }
      expect(after.events.map((e) => e.type)).toEqual(['Late', 'Fast']);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});

const ev = (type: string, eventId = randomUUID()): EventToAppend => ({
  type,
  data: { type },
  metadata: { eventId, correlationId: eventId, causationId: null, companyId: 1, actor: 'test', at: new Date(0).toISOString() },
});

describe('postgres event store: appendMany and prepared statements', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let store: PostgresEventStore;
  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 1 }); // one connection: its prepared statements are visible below
    store = new PostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });
  const count = async (streams: string[]) =>
    Number((await db.pool.query('SELECT count(*) AS n FROM es.events WHERE stream_id = ANY($1)', [streams])).rows[0].n);

  it('is all or nothing: a failing expectation after passing ones appends none of them', async () => {
    const [a, b, c] = ['a', 'b', 'c'].map((x) => `${x}-${randomUUID()}`);
    await store.append(c, [ev('C0')], 'no_stream');
    await expect(store.appendMany([
      { streamId: a, events: [ev('A0'), ev('A1')], expected: 'no_stream' },
      { streamId: b, events: [ev('B0')], expected: 'any' },
      { streamId: c, events: [ev('C1')], expected: 'no_stream' },
    ])).rejects.toMatchObject({ name: 'WrongExpectedRevisionError', streamId: c, actual: 0n });
    expect(await count([a, b])).toBe(0);
    expect(await count([c])).toBe(1);
  });

  it('is all or nothing on a unique violation: an event id stored in another stream appends nothing', async () => {
    const [a, b, other] = ['a', 'b', 'o'].map((x) => `${x}-${randomUUID()}`);
    const taken = ev('Taken');
    await store.append(other, [taken], 'no_stream');
    const attempt = store.appendMany([
      { streamId: a, events: [ev('A0')], expected: 'no_stream' },
      { streamId: b, events: [ev('B0'), { ...taken }], expected: 'no_stream' },
    ]);
    await expect(attempt).rejects.toBeInstanceOf(DuplicateEventIdError);
    await expect(attempt).rejects.toMatchObject({ streamId: b, eventIds: [taken.metadata.eventId] });
    expect(await count([a, b])).toBe(0);
  });

  it('an entry only partly stored is a DuplicateEventIdError, not a silent partial append', async () => {
    const s = `p-${randomUUID()}`;
    const first = ev('P0');
    await store.append(s, [first], 'no_stream');
    await expect(store.appendMany([{ streamId: s, events: [first, ev('P1')], expected: 'any' }])).rejects.toBeInstanceOf(DuplicateEventIdError);
    expect(await count([s])).toBe(1);
  });

  it('conflicts with a concurrent single append on the same revision: one wins, the other is told', async () => {
    const s = `r-${randomUUID()}`;
    await store.append(s, [ev('R0')], 'no_stream');
    const results = await Promise.allSettled([
      store.append(s, [ev('R1a')], 0n),
      store.appendMany([{ streamId: s, events: [ev('R1b')], expected: 0n }]),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
    expect(await count([s])).toBe(2);
  });

  it('append, appendMany, readStream, readStreams and readAll run as named prepared statements', async () => {
    const s = `n-${randomUUID()}`;
    await store.append(s, [ev('N0')], 'no_stream');
    await store.appendMany([{ streamId: s, events: [ev('N1')], expected: 0n }]);
    expect((await store.readStream(s)).map((e) => e.type)).toEqual(['N0', 'N1']);
    expect((await store.readStreams([s])).get(s)!.map((e) => e.type)).toEqual(['N0', 'N1']);
    await store.readAll('' as never, 10);
    // again, on the same connection: the prepared statements are reused (a name with another text would fail)
    await store.append(s, [ev('N2')], 1n);
    expect((await store.readStream(s, 2n)).map((e) => e.type)).toEqual(['N2']);
    const names = (await db.pool.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name')).rows.map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(['es_append', 'es_append_many', 'es_read_all', 'es_read_stream', 'es_read_streams']));
  });
});
