import { Readable } from 'node:stream';
import fc from 'fast-check';
import type { Position as EsdbPosition } from '@eventstore/db-client';
import { EsdbEventStore, type EsdbClient } from '../../src/adapters/event-store/esdb';
import { AppendRefusedError, assertAppended, portActualRevision } from '../../src/adapters/event-store/esdb-append-outcome';
import {
  cmpEsdb,
  decodeEsdbPosition,
  encodeEsdbPosition,
  ESDB_NO_POSITION,
  esdbEventPosition,
  readAllPages,
  SystemRuns,
  type ReadAllPage,
} from '../../src/adapters/event-store/esdb-read-all';
import { InvalidPositionError, type Position, START, WrongExpectedRevisionError } from '../../src/ports/event-store';

// Review 16d: the EventStoreDB adapter, reviewed by reading (no server can run here). These test the pure parts it
// was split into, over a $all held in an array that reads as EventStoreDB documents it: a forward read includes the
// event at its start position; positions are byte offsets with gaps; system events ($ types, $ streams) interleave.

interface LogItem {
  event: { streamId: string; type: string; position: EsdbPosition; id: string };
}

const at = (i: number): EsdbPosition => ({ commit: BigInt(1000 + 137 * i), prepare: BigInt(1000 + 137 * i) });

function makeLog(kinds: Array<'app' | 'sys'>): LogItem[] {
  return kinds.map((k, i) => ({
    event: k === 'app' ? { streamId: `s-${i % 7}`, type: 'Thing', position: at(i), id: `e${i}` } : { streamId: '$stats-127.0.0.1:2113', type: '$statistics-collected', position: at(i), id: `e${i}` },
  }));
}

/** A page reader over `log` (forward, inclusive of `from`), counting calls and items handed out. */
function pages(log: LogItem[]) {
  const counter = { calls: 0, items: 0 };
  const read: ReadAllPage<LogItem> = (from, maxCount) => {
    counter.calls++;
    let lo = 0;
    let hi = log.length;
    while (from && lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cmpEsdb(log[mid].event.position, from) < 0) lo = mid + 1;
      else hi = mid;
    }
    const slice = log.slice(lo, lo + maxCount);
    counter.items += slice.length;
    return (async function* () {
      yield* slice;
    })();
  };
  return { read, counter };
}

const ids = (events: Array<{ id: string }>) => events.map((e) => e.id);
const convert = (e: LogItem['event']) => ({ id: e.id });

describe('review 16d: EventStoreDB readAll over $all (esdb-read-all.ts)', () => {
  it('finds the next event of ours behind 60,000 system events (it used to answer an empty batch, read as the end of the log)', async () => {
    const log = makeLog(['app', ...Array<'sys'>(60_000).fill('sys'), 'app']);
    const { read } = pages(log);
    const after = encodeEsdbPosition(log[0].event.position);
    const batch = await readAllPages(read, after, 10, convert, new SystemRuns());
    expect(ids(batch.events)).toEqual(['e60001']);
    expect(batch.nextPosition).toBe(encodeEsdbPosition(log[60_001].event.position));
  });

  it('a poll from the same checkpoint does not read the trailing system events again, and then finds a new event', async () => {
    const log = makeLog(['app', ...Array<'sys'>(10_000).fill('sys')]);
    const { read, counter } = pages(log);
    const runs = new SystemRuns();
    const after = encodeEsdbPosition(log[0].event.position);
    const first = await readAllPages(read, after, 50, convert, runs);
    expect(first).toEqual({ events: [], nextPosition: encodeEsdbPosition(log[10_000].event.position) });
    expect(counter.items).toBeGreaterThanOrEqual(10_000);

    counter.items = 0;
    const again = await readAllPages(read, after, 50, convert, runs); // the fan-out and the lag keep asking from their checkpoint
    expect(again.events).toEqual([]);
    expect(counter.items).toBeLessThanOrEqual(1);

    log.push(...makeLog([...Array<'sys'>(10_001).fill('sys'), 'app']).slice(10_001).map((x) => ({ event: { ...x.event, id: 'new' } })));
    counter.items = 0;
    const later = await readAllPages(read, after, 50, convert, runs);
    expect(ids(later.events)).toEqual(['new']);
    expect(counter.items).toBeLessThanOrEqual(2);
  });

  it('crosses a long run of system events in few round trips when asked for one event', async () => {
    const log = makeLog(['app', ...Array<'sys'>(20_000).fill('sys'), 'app', 'app']);
    const { read, counter } = pages(log);
    const batch = await readAllPages(read, encodeEsdbPosition(log[0].event.position), 1, convert);
    expect(ids(batch.events)).toEqual(['e20001']);
    expect(counter.calls).toBeLessThan(20); // two events a page took 10,000 round trips
  });

  it('a reader following nextPosition sees every event of ours once, in order, before its first empty batch', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom<'app' | 'sys'>('app', 'sys', 'sys'), { maxLength: 300 }),
        fc.integer({ min: 1, max: 7 }),
        async (kinds, limit) => {
          const log = makeLog(kinds);
          const { read } = pages(log);
          const runs = new SystemRuns(4);
          const seen: string[] = [];
          let pos = START;
          for (let rounds = 0; rounds < 1000; rounds++) {
            const batch = await readAllPages(read, pos, limit, convert, runs);
            expect(batch.events.length).toBeLessThanOrEqual(limit);
            seen.push(...ids(batch.events));
            if (batch.events.length === 0) break; // the end of the log, as on Postgres
            pos = batch.nextPosition;
          }
          expect(seen).toEqual(log.filter((x) => x.event.type === 'Thing').map((x) => x.event.id));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses a position with a part of 2^64-1 or above before reading anything (the client sent it wrapped)', async () => {
    const { read, counter } = pages(makeLog(['app']));
    for (const p of ['18446744073709551616/1', '1/18446744073709551616', '18446744073709551615/18446744073709551615', '99999999999999999999999/0']) {
      expect(() => decodeEsdbPosition(p as Position)).toThrow(InvalidPositionError);
      await expect(readAllPages(read, p as Position, 10, convert)).rejects.toBeInstanceOf(InvalidPositionError);
    }
    expect(counter.calls).toBe(0);
    expect(decodeEsdbPosition('18446744073709551614/18446744073709551614' as Position)).toEqual({ commit: ESDB_NO_POSITION - 1n, prepare: ESDB_NO_POSITION - 1n });
    expect(decodeEsdbPosition(START)).toBeNull();
  });
});

describe('review 16d: positions of stream reads and append answers', () => {
  it('takes the uint64 maximum a stream read answers on a server without positions as no position', () => {
    expect(esdbEventPosition({ event: { position: { commit: ESDB_NO_POSITION, prepare: ESDB_NO_POSITION } } })).toBeUndefined();
    expect(esdbEventPosition({ event: { position: { commit: ESDB_NO_POSITION, prepare: ESDB_NO_POSITION } }, commitPosition: 4242n })).toEqual({ commit: 4242n, prepare: 4242n });
    expect(esdbEventPosition({ event: { position: { commit: 10n, prepare: 9n } } })).toEqual({ commit: 10n, prepare: 9n });
    expect(esdbEventPosition({ commitPosition: ESDB_NO_POSITION })).toBeUndefined();
  });

  it('an append answered success: false (throwOnAppendFailure=false) is a refusal, not a write', () => {
    expect(() => assertAppended('s-1', { success: false, nextExpectedRevision: 1n })).toThrow(AppendRefusedError);
    expect(() => assertAppended('s-1', { success: true, nextExpectedRevision: 1n })).not.toThrow();
    expect(portActualRevision(-1n)).toBe('no_stream');
    expect(portActualRevision(7n)).toBe(7n);
    expect(portActualRevision('no_stream')).toBe('no_stream');
  });

  it('the adapter reports such an answer as WrongExpectedRevisionError with the stream revision it reads', async () => {
    // the client as configured by `esdb://host:2113?tls=false&throwOnAppendFailure=false`: a refusal resolves
    const stored = { streamId: 'orders-1', id: '11111111-1111-4111-8111-111111111111', type: 'A', revision: 0n, created: new Date(0), isJson: true, data: {}, metadata: undefined, position: { commit: 500n, prepare: 500n } };
    const client = {
      appendToStream: async () => ({ success: false, nextExpectedRevision: 1n, position: undefined }),
      readStream: () => Readable.from([{ event: stored, commitPosition: 500n }]),
    } as unknown as EsdbClient;
    const store = new EsdbEventStore({ client, watchOthers: false });
    const event = { type: 'B', data: {}, metadata: { eventId: '22222222-2222-4222-8222-222222222222', correlationId: 'c', causationId: null, companyId: 1, actor: 'test', at: new Date(0).toISOString() } };
    const err = await store.append('orders-1', [event], 'no_stream').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WrongExpectedRevisionError);
    expect(err).toMatchObject({ streamId: 'orders-1', expected: 'no_stream', actual: 0n });
    await store.close();
  });
});
