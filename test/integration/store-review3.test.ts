// Review of the Postgres event store (third pass): global order under concurrent appends from several
// processes (pools) including group-committed creations and late commits, expected-revision races, reads.
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import {
  type EventToAppend,
  type Position,
  START,
  WrongExpectedRevisionError,
} from '../../src/ports/event-store';
import { createTestDatabase, type TestDatabase } from '../support/db';

const ev = (type: string, data: unknown = { type }, eventId = randomUUID()): EventToAppend => ({
  type,
  data,
  metadata: { eventId, correlationId: eventId, causationId: null, companyId: 1, actor: 'test', at: new Date(0).toISOString() },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('postgres event store review 3', () => {
  let db: TestDatabase;
  /** one pool and one store per simulated process, wired as main.ts wires the store's pool */
  const processes: Array<{ pool: Pool; store: PostgresEventStore }> = [];
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 4 });
    for (let i = 0; i < 3; i++) {
      const pool = createPool(db.url, 6, { genericPlans: true });
      processes.push({ pool, store: new PostgresEventStore(pool) });
    }
    store = processes[0].store;
  });
  afterAll(async () => {
    for (const p of processes) {
      await p.store.close();
      await p.pool.end();
    }
    await db.drop();
  });

  describe('a reader following the global position', () => {
    it('sees every event once while three processes append (creations, appends, appendMany) and transactions commit late', async () => {
      const prefix = `follow-${randomUUID()}`;
      const start = await store.headPosition();
      const expected = new Set<string>();
      const seen: string[] = [];
      let writing = true;
      let finalHead: Position | undefined;
      const reader = (async () => {
        let pos = start;
        for (;;) {
          const batch = await store.readAll(pos, 7); // small batches: many positions inside transactions
          for (const e of batch.events) if (e.streamId.startsWith(prefix)) seen.push(e.metadata.eventId);
          pos = batch.nextPosition;
          if (batch.events.length === 0) {
            if (!writing && finalHead !== undefined && pos !== START && store.comparePositions(pos, finalHead) >= 0) return;
            await sleep(1);
          }
        }
      })();
      const track = (events: EventToAppend[]) => {
        for (const e of events) expected.add(e.metadata.eventId);
        return events;
      };
      // a writer that takes its transaction id and sequence values first and commits after others
      const lateWriter = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const client = await db.pool.connect();
          try {
            await client.query('BEGIN');
            const id = randomUUID();
            expected.add(id);
            await client.query(
              `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ($1, 0, $2, 'Late', '{}', $3)`,
              [`${prefix}-late-${i}`, id, JSON.stringify({ eventId: id })],
            );
            await sleep(15);
            await client.query('COMMIT');
          } finally {
            client.release();
          }
        }
      };
      const writer = async (p: number) => {
        const s = processes[p].store;
        for (let i = 0; i < 30; i++) {
          // creations arrive together: group commit shares statements
          await Promise.all([0, 1, 2].map((k) => s.append(`${prefix}-c-${p}-${i}-${k}`, track([ev('Created')]), 'no_stream')));
          await s.append(`${prefix}-any-${i % 4}`, track([ev('A'), ev('B')]), 'any');
          await s.appendMany([
            { streamId: `${prefix}-m-${p}-${i}-a`, events: track([ev('M1')]), expected: 'no_stream' },
            { streamId: `${prefix}-m-${p}-${i}-b`, events: track([ev('M2'), ev('M3')]), expected: 'any' },
          ]);
        }
      };
      await Promise.all([writer(0), writer(1), writer(2), lateWriter(12)]);
      finalHead = await store.headPosition();
      writing = false;
      await reader;
      expect(new Set(seen).size).toBe(seen.length); // nothing read twice
      expect(new Set(seen)).toEqual(expected); // nothing skipped
      // the group commit did share statements (otherwise this test would not cover it)
      expect(processes.some((p) => p.store.creations.stats.creations > p.store.creations.stats.batches)).toBe(true);
    });

    it('does not pass a transaction still open in another process, and returns its events once it commits', async () => {
      const prefix = `hold-${randomUUID()}`;
      const from = await store.headPosition();
      const client = await processes[2].pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(
          `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ($1, 0, gen_random_uuid(), 'Held', '{}', '{}')`,
          [`${prefix}-held`],
        );
        const after = await processes[1].store.append(`${prefix}-after`, [ev('After')], 'no_stream');
        const blocked = await store.readAll(from, 100);
        expect(blocked.events.filter((e) => e.streamId.startsWith(prefix))).toEqual([]);
        expect(store.comparePositions(await store.headPosition(), after.position)).toBeGreaterThanOrEqual(0);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      let got: string[] = [];
      for (let i = 0; i < 2000 && got.length < 2; i++) {
        got = (await store.readAll(from, 100)).events.filter((e) => e.streamId.startsWith(prefix)).map((e) => e.type);
        if (got.length < 2) await sleep(5);
      }
      expect(got).toEqual(['Held', 'After']);
    });
  });

  describe('expected revisions', () => {
    it('of many concurrent appends at the same revision from three processes exactly one wins; the others get WrongExpectedRevisionError with the actual revision', async () => {
      const s = `race-${randomUUID()}`;
      await store.append(s, [ev('A')], 'no_stream');
      const results = await Promise.allSettled(
        Array.from({ length: 9 }, (_, i) => processes[i % 3].store.append(s, [ev(`B${i}`)], 0n)),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results.filter((x): x is PromiseRejectedResult => x.status === 'rejected')) {
        expect(r.reason).toBeInstanceOf(WrongExpectedRevisionError);
        expect((r.reason as WrongExpectedRevisionError).actual).toBe(1n);
        expect((r.reason as WrongExpectedRevisionError).expected).toBe(0n);
      }
      expect((await store.readStream(s)).map((e) => e.revision)).toEqual([0n, 1n]);
    });

    it('of concurrent creations (no_stream) of one stream by three processes exactly one wins', async () => {
      const s = `create-${randomUUID()}`;
      const results = await Promise.allSettled(
        Array.from({ length: 6 }, (_, i) => processes[i % 3].store.append(s, [ev(`C${i}`), ev(`D${i}`)], 'no_stream')),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results.filter((x): x is PromiseRejectedResult => x.status === 'rejected')) {
        expect(r.reason).toBeInstanceOf(WrongExpectedRevisionError);
        expect((r.reason as WrongExpectedRevisionError).actual).toBe(1n);
      }
      const stored = await store.readStream(s);
      expect(stored).toHaveLength(2);
      expect(stored[0].type.slice(1)).toBe(stored[1].type.slice(1)); // both events of the one winner
    });

    it('concurrent appends expecting the stream to exist all succeed, one after the other (exists is not a revision)', async () => {
      const s = `exists-${randomUUID()}`;
      await store.append(s, [ev('A')], 'no_stream');
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, (_, i) => processes[i % 3].store.append(s, [ev(`E${i}`)], 'exists')),
      );
      expect(results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
      expect((await store.readStream(s)).map((e) => e.revision)).toEqual(Array.from({ length: 13 }, (_, i) => BigInt(i)));
    });

    it('an append whose event id is stored in another stream is refused at once, not retried as a revision race', async () => {
      let statements = 0;
      const counting = new Proxy(db.pool, {
        get(target, prop, receiver) {
          if (prop === 'query') return (...args: unknown[]) => { statements++; return (target.query as (...a: unknown[]) => unknown)(...args); };
          return Reflect.get(target, prop, receiver);
        },
      });
      const counted = new PostgresEventStore(counting);
      const stolen = ev('Stolen');
      await counted.append(`owner-${randomUUID()}`, [stolen], 'no_stream');
      for (const expected of ['any', 'no_stream', 'exists'] as const) {
        const target = `thief-${randomUUID()}`;
        if (expected === 'exists') await counted.append(target, [ev('First')], 'no_stream');
        statements = 0;
        await expect(counted.append(target, [{ ...stolen }], expected)).rejects.toBeInstanceOf(WrongExpectedRevisionError);
        expect({ expected, statements }).toEqual({ expected, statements: 3 }); // the append, the stored-ids check, the revision
      }
    });

    it('an empty append is refused without touching the stream, whatever the expectation', async () => {
      const s = `empty-${randomUUID()}`;
      for (const expected of ['no_stream', 'any', 'exists', 0n] as const) {
        await expect(store.append(s, [], expected)).rejects.toThrow('append needs at least one event');
      }
      expect(await store.readStream(s)).toEqual([]);
      await expect(store.appendMany([{ streamId: s, events: [], expected: 'any' }])).rejects.toThrow('has no events');
      expect(await store.readStream(s)).toEqual([]);
    });
  });

  describe('reads', () => {
    it('reads a stream from a revision (inside, at the end, past the end)', async () => {
      const s = `from-${randomUUID()}`;
      await store.append(s, [ev('R0'), ev('R1'), ev('R2'), ev('R3')], 'no_stream');
      expect((await store.readStream(s, 2n)).map((e) => [e.type, e.revision])).toEqual([['R2', 2n], ['R3', 3n]]);
      expect((await store.readStream(s, 3n)).map((e) => e.type)).toEqual(['R3']);
      expect(await store.readStream(s, 4n)).toEqual([]);
      expect(await store.readStream(s, 9_000_000_000n)).toEqual([]);
    });

    it('keeps stream ids with odd characters apart and exact', async () => {
      const ids = [
        `odd-${randomUUID()}-'quote"double\\back`,
        `odd-${randomUUID()}-%_like*?[]`,
        `odd-${randomUUID()}-ünïcødé-日本-😀`,
        `odd-${randomUUID()}- spaces and\ttab\nnewline `,
        `odd-${randomUUID()}-${'x'.repeat(2000)}`,
      ];
      for (const id of ids) await store.append(id, [ev('Odd', { id })], 'no_stream');
      for (const id of ids) {
        const read = await store.readStream(id);
        expect(read.map((e) => [e.streamId, e.data])).toEqual([[id, { id }]]);
      }
      // a LIKE-pattern id matches nothing but itself
      expect(await store.readStream(`odd-%`)).toEqual([]);
      const many = await store.readStreams(ids);
      expect([...many.values()].map((events) => events.length)).toEqual(ids.map(() => 1));
    });

    it('stores and reads back a very large event exactly (5 MB of data)', async () => {
      const s = `large-${randomUUID()}`;
      const big = { text: 'é😀'.repeat(800_000), list: Array.from({ length: 20_000 }, (_, i) => ({ i, s: `v${i}` })) };
      const appended = await store.append(s, [ev('Big', big)], 'no_stream');
      const [read] = await store.readStream(s);
      expect(read.data).toEqual(big);
      let found = false;
      let pos: Position = START;
      for (let i = 0; i < 2000 && !found; i++) {
        const batch = await store.readAll(pos, 1000);
        found = batch.events.some((e) => e.streamId === s && e.position === appended.position);
        pos = batch.nextPosition;
        if (!found && batch.events.length === 0) await sleep(5);
      }
      expect(found).toBe(true);
    });

    it('readAll with a limit splits one transaction\'s events and resumes inside it', async () => {
      const s = `split-${randomUUID()}`;
      const before = await store.headPosition();
      await store.append(s, [ev('S0'), ev('S1'), ev('S2'), ev('S3'), ev('S4')], 'no_stream');
      const types: string[] = [];
      let pos = before;
      for (let i = 0; i < 2000 && types.length < 5; i++) {
        const batch = await store.readAll(pos, 2);
        expect(batch.events.length).toBeLessThanOrEqual(2);
        types.push(...batch.events.filter((e) => e.streamId === s).map((e) => e.type));
        pos = batch.nextPosition;
        if (batch.events.length === 0) await sleep(5);
      }
      expect(types).toEqual(['S0', 'S1', 'S2', 'S3', 'S4']);
    });
  });
});
