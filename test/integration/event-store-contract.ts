import { randomUUID } from 'node:crypto';
import {
  type EventStore,
  type EventToAppend,
  type Position,
  START,
  WrongExpectedRevisionError,
} from '../../src/ports/event-store';

export interface StoreUnderTest {
  store: EventStore;
  cleanup: () => Promise<void>;
}

const ev = (type: string, data: unknown, eventId = randomUUID()): EventToAppend => ({
  type,
  data,
  metadata: { eventId, correlationId: eventId, causationId: null, companyId: 1, actor: 'test', at: new Date(0).toISOString() },
});

/**
 * Reads from `from` until the reader has passed the newest committed event. readAll may hold back for a moment
 * while an older transaction anywhere on the server is still open (that is its guarantee), so an empty batch
 * means "not yet", not "the end".
 */
async function readEverything(store: EventStore, from: Position = START) {
  const target = await store.headPosition();
  const out = [];
  let pos = from;
  const behind = () => target !== START && (pos === START || store.comparePositions(pos, target) < 0);
  for (let idle = 0; behind(); ) {
    const batch = await store.readAll(pos, 500);
    if (batch.events.length === 0) {
      if (++idle > 2000) throw new Error(`readAll did not reach ${target} (stuck at ${pos})`);
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    out.push(...batch.events);
    pos = batch.nextPosition;
  }
  return { events: out, last: pos };
}

/** One contract for every event-store adapter (Postgres always; EventStoreDB when EVENTSTORE_URL is set). */
export function describeEventStoreContract(name: string, make: () => Promise<StoreUnderTest>): void {
  describe(`event store contract: ${name}`, () => {
    let sut: StoreUnderTest;
    let store: EventStore;
    const stream = (prefix: string) => `${prefix}-${randomUUID()}`;

    beforeAll(async () => {
      sut = await make();
      store = sut.store;
    });
    afterAll(async () => {
      await sut?.cleanup();
    });

    it('appends to a new stream and reads it back in revision order with metadata', async () => {
      const s = stream('orders');
      const r = await store.append(s, [ev('A', { n: 1 }), ev('B', { n: 2 })], 'no_stream');
      expect(r.nextRevision).toBe(1n);
      expect(r.alreadyAppended).toBe(false);
      const events = await store.readStream(s);
      expect(events.map((e) => [e.type, e.data, e.revision])).toEqual([
        ['A', { n: 1 }, 0n],
        ['B', { n: 2 }, 1n],
      ]);
      expect(events[0].metadata.actor).toBe('test');
      expect(events[0].streamId).toBe(s);
      expect(await store.readStream(s, 1n)).toHaveLength(1);
    });

    it('keeps data and metadata exactly, event by event and in order, through append and appendMany', async () => {
      const tricky = (i: number) => ({
        i,
        text: `quote " backslash \\ "\\"" {braces} [1,2] comma, tab\t newline\n ${'ñ€😀'} \u001f`,
        nested: { list: [null, true, 1.5, -0, 'x"y'], empty: {}, deep: { a: [[{}]] } },
        big: 12345678901234567,
      });
      const withMeta = (e: EventToAppend, i: number): EventToAppend => ({ ...e, metadata: { ...e.metadata, actor: `act"or\\${i}` } });
      const single = stream('tricky-one');
      const many = [stream('tricky-a'), stream('tricky-b')];
      await store.append(single, [0, 1, 2].map((i) => withMeta(ev(`T${i}`, tricky(i)), i)), 'no_stream');
      await store.appendMany([
        { streamId: many[0], events: [3, 4].map((i) => withMeta(ev(`T${i}`, tricky(i)), i)), expected: 'no_stream' },
        { streamId: many[1], events: [5].map((i) => withMeta(ev(`T${i}`, tricky(i)), i)), expected: 'no_stream' },
      ]);
      const read = [...(await store.readStream(single)), ...(await store.readStream(many[0])), ...(await store.readStream(many[1]))];
      expect(read.map((e) => [e.type, e.data, e.metadata.actor])).toEqual(
        [0, 1, 2, 3, 4, 5].map((i) => [`T${i}`, JSON.parse(JSON.stringify(tricky(i))), `act"or\\${i}`]),
      );
    });

    it('reads an unknown stream as empty', async () => {
      expect(await store.readStream(stream('nothing'))).toEqual([]);
    });

    it('enforces expected revisions: no_stream, exists, exact, any', async () => {
      const s = stream('exp');
      await expect(store.append(s, [ev('A', {})], 'exists')).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      await expect(store.append(s, [ev('A', {})], 0n)).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      await store.append(s, [ev('A', {})], 'no_stream');
      await expect(store.append(s, [ev('B', {})], 'no_stream')).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      await expect(store.append(s, [ev('B', {})], 5n)).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      expect((await store.append(s, [ev('B', {})], 0n)).nextRevision).toBe(1n);
      expect((await store.append(s, [ev('C', {})], 'exists')).nextRevision).toBe(2n);
      expect((await store.append(s, [ev('D', {})], 'any')).nextRevision).toBe(3n);
      expect((await store.readStream(s)).map((e) => e.type)).toEqual(['A', 'B', 'C', 'D']);
    });

    it('lets exactly one of two concurrent writers at the same revision win', async () => {
      const s = stream('race');
      await store.append(s, [ev('A', {})], 'no_stream');
      const results = await Promise.allSettled([store.append(s, [ev('B1', {})], 0n), store.append(s, [ev('B2', {})], 0n)]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(rejected.reason).toBeInstanceOf(WrongExpectedRevisionError);
      expect(await store.readStream(s)).toHaveLength(2);
    });

    it('recognises a retried append with the same event ids and does not duplicate it', async () => {
      const s = stream('idem');
      const batch = [ev('A', { x: 1 }), ev('B', { x: 2 })];
      const first = await store.append(s, batch, 'no_stream');
      const again = await store.append(s, batch, 'no_stream');
      expect(again.alreadyAppended).toBe(true);
      expect(again.nextRevision).toBe(first.nextRevision);
      expect(await store.readStream(s)).toHaveLength(2);
    });

    it('appendMany appends to several streams with their own expectations; readStreams reads them back', async () => {
      const fresh = stream('many-new');
      const existing = stream('many-old');
      const anyStream = stream('many-any');
      await store.append(existing, [ev('Old0', {}), ev('Old1', {})], 'no_stream');
      await store.append(anyStream, [ev('Any0', {})], 'no_stream');
      const head0 = await store.headPosition();
      const results = await store.appendMany([
        { streamId: fresh, events: [ev('N0', { n: 0 }), ev('N1', { n: 1 })], expected: 'no_stream' },
        { streamId: existing, events: [ev('Old2', { n: 2 })], expected: 1n },
        { streamId: anyStream, events: [ev('Any1', {})], expected: 'any' },
      ]);
      expect(results.map((r) => [r.nextRevision, r.alreadyAppended])).toEqual([[1n, false], [2n, false], [1n, false]]);
      expect(store.comparePositions(results[0].position, results[1].position)).toBeLessThan(0);
      expect(store.comparePositions(results[1].position, results[2].position)).toBeLessThan(0);

      const unknown = stream('many-unknown');
      const read = await store.readStreams([fresh, existing, unknown, anyStream]);
      expect([...read.keys()].sort()).toEqual([fresh, existing, unknown, anyStream].sort());
      expect(read.get(fresh)!.map((e) => [e.type, e.data, e.revision, e.streamId])).toEqual([
        ['N0', { n: 0 }, 0n, fresh],
        ['N1', { n: 1 }, 1n, fresh],
      ]);
      expect(read.get(existing)!.map((e) => [e.type, e.revision])).toEqual([['Old0', 0n], ['Old1', 1n], ['Old2', 2n]]);
      expect(read.get(anyStream)!.map((e) => e.type)).toEqual(['Any0', 'Any1']);
      expect(read.get(unknown)).toEqual([]);
      expect(read.get(existing)!.at(-1)!.metadata.actor).toBe('test');
      // readStream and readAll see the same events, in the order they were given
      expect(await store.readStream(existing)).toEqual(read.get(existing));
      const { events } = await readEverything(store, head0);
      const mine = new Set([fresh, existing, anyStream]);
      expect(events.filter((e) => mine.has(e.streamId)).map((e) => e.type)).toEqual(['N0', 'N1', 'Old2', 'Any1']);
    });

    it('appendMany refuses a failing expectation (WrongExpectedRevisionError naming the stream) and appends nothing', async () => {
      const s = stream('many-conflict');
      await store.append(s, [ev('A', {})], 'no_stream');
      const other = stream('many-other');
      const attempt = store.appendMany([
        { streamId: s, events: [ev('B', {})], expected: 5n },
        { streamId: other, events: [ev('X', {})], expected: 'no_stream' },
      ]);
      await expect(attempt).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      await expect(attempt).rejects.toMatchObject({ streamId: s, expected: 5n, actual: 0n });
      const read = await store.readStreams([s, other]);
      expect(read.get(s)!.map((e) => e.type)).toEqual(['A']);
      expect(read.get(other)).toEqual([]);
      await expect(store.appendMany([{ streamId: stream('x'), events: [ev('A', {})], expected: 'exists' }])).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    });

    it('appendMany recognises entries stored already (a retried batch) and appends the others', async () => {
      const a = stream('many-idem-a');
      const b = stream('many-idem-b');
      const c = stream('many-idem-c');
      const batchA = [ev('A0', {}), ev('A1', {})];
      const batchB = [ev('B0', {})];
      const first = await store.appendMany([
        { streamId: a, events: batchA, expected: 'no_stream' },
        { streamId: b, events: batchB, expected: 'no_stream' },
      ]);
      const again = await store.appendMany([
        { streamId: a, events: batchA, expected: 'no_stream' },
        { streamId: b, events: batchB, expected: 'no_stream' },
        { streamId: c, events: [ev('C0', {})], expected: 'no_stream' },
      ]);
      expect(again.map((r) => r.alreadyAppended)).toEqual([true, true, false]);
      expect(again[0].nextRevision).toBe(first[0].nextRevision);
      expect(again[0].position).toBe(first[0].position);
      expect(again[1].nextRevision).toBe(0n);
      expect(again[2].nextRevision).toBe(0n);
      const read = await store.readStreams([a, b, c]);
      expect([a, b, c].map((s) => read.get(s)!.map((e) => e.type))).toEqual([['A0', 'A1'], ['B0'], ['C0']]);
    });

    it('lets exactly one of two concurrent appendMany calls at the same revision win', async () => {
      const s = stream('many-race');
      await store.append(s, [ev('A', {})], 'no_stream');
      const results = await Promise.allSettled([
        store.appendMany([{ streamId: s, events: [ev('B1', {})], expected: 0n }, { streamId: stream('r1'), events: [ev('R', {})], expected: 'no_stream' }]),
        store.appendMany([{ streamId: s, events: [ev('B2', {})], expected: 0n }]),
      ]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
      expect(await store.readStream(s)).toHaveLength(2);
    });

    it('appendMany refuses a stream given twice or an entry without events', async () => {
      const s = stream('many-bad');
      await expect(store.appendMany([{ streamId: s, events: [ev('A', {})], expected: 'any' }, { streamId: s, events: [ev('B', {})], expected: 'any' }])).rejects.toThrow(/appears twice/);
      await expect(store.appendMany([{ streamId: s, events: [], expected: 'any' }])).rejects.toThrow(/no events/);
      expect(await store.readStream(s)).toEqual([]);
      expect(await store.appendMany([])).toEqual([]);
    });

    it('reads all streams in global order, strictly after a position, with a comparable position', async () => {
      const head0 = await store.headPosition();
      const a = stream('ga');
      const b = stream('gb');
      const r1 = await store.append(a, [ev('A1', {})], 'no_stream');
      const r2 = await store.append(b, [ev('B1', {})], 'no_stream');
      const r3 = await store.append(a, [ev('A2', {})], 0n);
      expect(store.comparePositions(r1.position, r2.position)).toBeLessThan(0);
      expect(store.comparePositions(r3.position, r2.position)).toBeGreaterThan(0);
      expect(store.comparePositions(r2.position, r2.position)).toBe(0);
      const { events } = await readEverything(store, head0);
      const mine = events.filter((e) => e.streamId === a || e.streamId === b);
      expect(mine.map((e) => e.type)).toEqual(['A1', 'B1', 'A2']);
      const afterFirst = await readEverything(store, r1.position);
      expect(afterFirst.events.filter((e) => e.streamId === a || e.streamId === b).map((e) => e.type)).toEqual(['B1', 'A2']);
      expect(store.comparePositions(await store.headPosition(), r3.position)).toBeGreaterThanOrEqual(0);
      expect(await store.countAfter(r1.position)).toBeGreaterThanOrEqual(2);
      const empty = await store.readAll(await store.headPosition(), 10);
      expect(empty.events).toHaveLength(0);
    });

    it('never skips or repeats an event for a reader following readAll while 8 writers append concurrently', async () => {
      const start = await store.headPosition();
      const writers = 8;
      const perWriter = 40;
      const prefix = `conc-${randomUUID()}`;
      const expected = new Set<string>();
      let writing = true;
      let finalHead: Position | undefined;
      const seen: string[] = [];
      const reader = (async () => {
        let pos = start;
        for (;;) {
          const batch = await store.readAll(pos, 50);
          for (const e of batch.events) if (e.streamId.startsWith(prefix)) seen.push(e.metadata.eventId);
          pos = batch.nextPosition;
          if (batch.events.length === 0) {
            // Done once every write has finished and the reader has passed the newest committed event.
            if (!writing && finalHead !== undefined && pos !== start && store.comparePositions(pos, finalHead) >= 0) return;
            await new Promise((r) => setTimeout(r, 1));
          }
        }
      })();
      await Promise.all(
        Array.from({ length: writers }, async (_, w) => {
          for (let i = 0; i < perWriter; i++) {
            const id = randomUUID();
            expected.add(id);
            // Several streams per writer and mixed batch sizes, so transactions interleave and commit out of order.
            const batch = i % 5 === 0 ? [ev('X', { w, i }, id), ev('Y', { w, i }, (() => { const y = randomUUID(); expected.add(y); return y; })())] : [ev('X', { w, i }, id)];
            await store.append(`${prefix}-${w}-${i % 3}`, batch, 'any');
          }
        }),
      );
      finalHead = await store.headPosition();
      writing = false;
      await reader;
      expect(new Set(seen).size).toBe(seen.length); // nothing repeated
      expect(seen.length).toBe(expected.size); // nothing skipped
      expect(new Set(seen)).toEqual(expected);
    });
  });
}
