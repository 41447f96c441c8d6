import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { DuplicateEventIdError, type EventToAppend, WrongExpectedRevisionError } from '../../src/ports/event-store';
import { createMetrics, exposeCreationGroupCommit } from '../../src/shared/metrics';
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

describe('postgres event store: creations arriving together share one statement (group commit)', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let store: PostgresEventStore;
  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 8 });
    store = new PostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });
  const txOf = (position: string) => position.split(':')[0];
  /** one creation that holds the statement slot, then `rest` started in the same tick: they go as one batch */
  const together = <T>(rest: () => Promise<T>[]) => {
    const head = store.append(`head-${randomUUID()}`, [ev('Head')], 'no_stream');
    return Promise.allSettled([head, ...rest()]);
  };

  it('commits concurrent creations of distinct streams in fewer statements, each answered as its own append', async () => {
    const before = { ...store.creations.stats };
    const streams = Array.from({ length: 30 }, (_, i) => `g${i}-${randomUUID()}`);
    const results = await Promise.all(streams.map((s, i) => store.append(s, [ev(`G${i}`), ev(`G${i}b`)], 'no_stream')));
    expect(results.map((r) => [r.nextRevision, r.alreadyAppended])).toEqual(streams.map(() => [1n, false]));
    const batches = store.creations.stats.batches - before.batches;
    expect(store.creations.stats.creations - before.creations).toBe(30);
    expect(batches).toBeLessThan(30);
    expect(new Set(results.map((r) => txOf(r.position))).size).toBe(batches); // one transaction per statement
    for (const [i, s] of streams.entries()) {
      const read = await store.readStream(s);
      expect(read.map((e) => [e.type, e.revision])).toEqual([[`G${i}`, 0n], [`G${i}b`, 1n]]);
      expect(read[1].position).toBe(results[i].position);
    }
  });

  it('its counts are Prometheus counters, read at scrape time (exposeCreationGroupCommit)', async () => {
    const metrics = createMetrics();
    exposeCreationGroupCommit(metrics, store.creations.stats);
    const scrape = async () => {
      const body = await metrics.registry.metrics();
      const value = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(body)?.[1]);
      return { batches: value('switchboard_event_store_creation_batches_total'), creations: value('switchboard_event_store_creations_total') };
    };
    const before = await scrape();
    expect(before).toEqual(store.creations.stats);
    await together(() => Array.from({ length: 5 }, (_, i) => store.append(`m${i}-${randomUUID()}`, [ev(`M${i}`)], 'no_stream')));
    const after = await scrape();
    expect(after.creations - before.creations).toBe(6);
    expect(after.batches - before.batches).toBe(2); // the head alone, then the five together
  });

  it('a stream that exists already fails only its own creation; the others of its batch are appended', async () => {
    const taken = `t-${randomUUID()}`;
    await store.append(taken, [ev('T0')], 'no_stream');
    const fresh = Array.from({ length: 5 }, () => `f-${randomUUID()}`);
    const settled = await together(() => [
      ...fresh.map((s) => store.append(s, [ev('F0')], 'no_stream')),
      store.append(taken, [ev('T0 again, other id')], 'no_stream'),
    ]);
    expect(settled.slice(0, 6).map((r) => r.status)).toEqual(Array(6).fill('fulfilled'));
    expect(settled[6]).toMatchObject({ status: 'rejected', reason: { name: 'WrongExpectedRevisionError', streamId: taken, actual: 0n } });
    for (const s of fresh) expect((await store.readStream(s)).map((e) => e.type)).toEqual(['F0']);
    expect((await store.readStream(taken)).map((e) => e.type)).toEqual(['T0']);
  });

  it('a creation whose event id is stored in another stream fails as it would alone; the others are appended', async () => {
    const other = `o-${randomUUID()}`;
    const stolen = ev('Stolen');
    await store.append(other, [stolen], 'no_stream');
    const alone = await store.append(`alone-${randomUUID()}`, [{ ...stolen }], 'no_stream').then(() => undefined, (err: Error) => err.name);
    const fresh = `f-${randomUUID()}`;
    const settled = await together(() => [store.append(fresh, [ev('F0')], 'no_stream'), store.append(`s-${randomUUID()}`, [{ ...stolen }], 'no_stream')]);
    expect(alone).toBeDefined();
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect((settled[2] as PromiseRejectedResult).reason.name).toBe(alone);
    expect((await store.readStream(fresh)).map((e) => e.type)).toEqual(['F0']);
  });

  it('two creations of two streams with an event id in common at once: the first is appended, the other fails as it would alone', async () => {
    const shared = ev('Shared');
    const [a, b] = [`a-${randomUUID()}`, `b-${randomUUID()}`];
    const before = { ...store.creations.stats };
    const settled = await together(() => [store.append(a, [shared], 'no_stream'), store.append(b, [{ ...shared }], 'no_stream')]);
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
    expect(store.creations.stats.batches - before.batches).toBe(3); // never in one statement
    expect((await store.readStream(a)).map((e) => e.type)).toEqual(['Shared']);
    expect(await store.readStream(b)).toEqual([]);
  });

  it('two creations of one stream at once: the same events are stored once (the repeat is told alreadyAppended), other events are refused', async () => {
    const same = `same-${randomUUID()}`;
    const event = ev('S0');
    const raced = `raced-${randomUUID()}`;
    const settled = await together(() => [
      store.append(same, [event], 'no_stream'),
      store.append(same, [{ ...event }], 'no_stream'),
      store.append(raced, [ev('R0')], 'no_stream'),
      store.append(raced, [ev('R0 other')], 'no_stream'),
    ]);
    const [, first, repeat, won, lost] = settled;
    expect([first, repeat].map((r) => r.status === 'fulfilled' && r.value.alreadyAppended)).toEqual([false, true]);
    expect(won).toMatchObject({ status: 'fulfilled', value: { nextRevision: 0n, alreadyAppended: false } });
    expect(lost).toMatchObject({ status: 'rejected', reason: { name: 'WrongExpectedRevisionError', streamId: raced } });
    expect((await store.readStream(same)).map((e) => e.type)).toEqual(['S0']);
    expect((await store.readStream(raced)).map((e) => e.type)).toEqual(['R0']);
  });
});
