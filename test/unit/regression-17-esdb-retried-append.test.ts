import { Readable } from 'node:stream';
import { BACKWARDS, END, START as ESDB_START } from '@eventstore/db-client';
import { EsdbEventStore, type EsdbClient } from '../../src/adapters/event-store/esdb';
import type { EventToAppend } from '../../src/ports/event-store';

// Review 17: since f0b88f5 an append whose connection was lost (the client's UnavailableError) is tried again (an
// unkeyed send's MessageRecorded, at `any` on its conversation's stream). Its first try may have been stored, its
// answer lost; the retry must find it even when other events were appended to the stream after it (a shared `any`
// stream), as ESDB's own idempotency at `any` is a cache of event ids a failover loses. Before, only the stream's
// very last events were compared, and the retry stored the message a second time. A stream held in an array, read
// as EventStoreDB reads (backwards from the end or from a revision, maxCount events).

const NOW = Date.parse('2026-11-28T10:00:00.000Z');
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

interface Stored { id: string; revision: bigint; created: Date }

function fakeClient(stream: Stored[]) {
  const appended: string[][] = [];
  const reads: number[] = [];
  const client = {
    readStream: (_id: string, o: { fromRevision: unknown; direction: unknown; maxCount: number }) => {
      const ordered = o.direction === BACKWARDS ? [...stream].reverse() : stream;
      const from = o.fromRevision === END || o.fromRevision === ESDB_START ? 0
        : ordered.findIndex((e) => e.revision === o.fromRevision);
      const page = from < 0 ? [] : ordered.slice(from, from + o.maxCount);
      reads.push(page.length);
      return Readable.from(page.map((e) => ({
        event: { streamId: 'conv-1', id: e.id, type: 'MessageRecorded', revision: e.revision, created: e.created, isJson: true, data: {}, metadata: {},
          position: { commit: 1000n + e.revision, prepare: 1000n + e.revision } },
        commitPosition: 1000n + e.revision,
      })));
    },
    appendToStream: async (_id: string, events: Array<{ id: string }>) => {
      appended.push(events.map((e) => e.id));
      for (const e of events) stream.push({ id: e.id, revision: BigInt(stream.length), created: new Date(NOW) });
      return { success: true, nextExpectedRevision: BigInt(stream.length - 1), position: { commit: 9999n, prepare: 9999n } };
    },
  } as unknown as EsdbClient;
  return { client, appended, reads };
}

const event = (id: string): EventToAppend => ({
  type: 'MessageRecorded', data: {},
  metadata: { eventId: id, correlationId: 'c', causationId: null, companyId: 1, actor: 'test', at: new Date(NOW).toISOString() },
});

describe('a retried append at any (review 17)', () => {
  it('finds its first try stored before other events of the stream: nothing appended again', async () => {
    const others = Array.from({ length: 40 }, (_, i) => ({ id: uuid(100 + i), revision: BigInt(3 + i), created: new Date(NOW + 2000) }));
    const stream: Stored[] = [
      { id: uuid(1), revision: 0n, created: new Date(NOW - 3_600_000) },
      { id: uuid(7), revision: 1n, created: new Date(NOW + 1000) }, // the first try of the batch below, its answer lost
      { id: uuid(8), revision: 2n, created: new Date(NOW + 1000) },
      ...others, // then other sends and replies in the same conversation
    ];
    const { client, appended } = fakeClient(stream);
    const store = new EsdbEventStore({ client, watchOthers: false });
    const result = await store.append('conv-1', [event(uuid(7)), event(uuid(8))], 'any');
    expect({ appended, result }).toEqual({ appended: [], result: { nextRevision: 2n, position: expect.any(String), alreadyAppended: true } });
    expect(stream).toHaveLength(43);
    await store.close();
  });

  it('appends a batch not stored, looking back no further than its own time (less the skew) on a busy stream', async () => {
    const stream: Stored[] = [
      { id: uuid(7), revision: 0n, created: new Date(NOW - 3_600_000) }, // stored long before this batch existed
      ...Array.from({ length: 3 }, (_, i) => ({ id: uuid(100 + i), revision: BigInt(1 + i), created: new Date(NOW - 1000) })),
    ];
    const { client, appended, reads } = fakeClient(stream);
    const store = new EsdbEventStore({ client, watchOthers: false });
    const result = await store.append('conv-1', [event(uuid(9))], 'any');
    expect({ appended, alreadyAppended: result.alreadyAppended }).toEqual({ appended: [[uuid(9)]], alreadyAppended: false });
    expect(reads).toEqual([1, 3]); // the tail, then one page back to an event older than the batch
    await store.close();
  });
});
