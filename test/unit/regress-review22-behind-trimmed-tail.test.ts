import type { Position, ReadAllBatch, RecordedEvent } from '../../src/ports/event-store';
import { START } from '../../src/ports/event-store';
import type { LogReader } from '../../src/projections/projection';
import { eventSizeEstimate } from '../../src/projections/read-sizes';
import { type ReadSizing, RUNNER_READ_BYTES, SharedLogReader } from '../../src/workers/shared-log-reader';

// Regression review 22 (of 9e47a5a, the runner's reads sized by their events): a projection that fell behind the
// runner's tail (the tail moved on through large events, driven by the other projections, and dropped the oldest)
// read on its own with the size its reads had grown to over small events: up to the runner's batch size of the large
// events the tail had just read a few at a time. 120 bulk chunks of 256 KiB came in one read (about 30 MB, 15 times
// RUNNER_READ_BYTES), though the runner had read every one of them and knew their sizes.

const pos = (i: number) => String(i).padStart(10, '0') as Position;

function event(i: number, data: unknown): RecordedEvent {
  return {
    type: 'Thing', data, streamId: `s-${i}`, revision: 0n, position: pos(i + 1),
    metadata: { eventId: `e${i}`, correlationId: 'c', causationId: null, companyId: 7, actor: 'system', at: '2026-11-28T12:00:00.000Z' } as never,
  };
}
const small = (i: number) => event(i, { messageId: `wamid.${i}`, to: '+5491112345678' });
const chunk = (i: number) => event(i, {
  bulkId: '00000000-0000-4000-8000-000000000022', chunk: i,
  recipients: Array.from({ length: 100 }, (_, r) => ({ index: r, phone: '+5491100000000', variables: { '1': `${i}:${r}`.padEnd(2500, 'x') } })),
});

/** An in-memory log that grows (`push`), and records every read: the limit asked and the events' estimated size. */
function growingLog(): LogReader & { events: RecordedEvent[]; reads: Array<{ limit: number; bytes: number }> } {
  const events: RecordedEvent[] = [];
  const reads: Array<{ limit: number; bytes: number }> = [];
  return {
    events,
    reads,
    async readAll(after: Position, limit: number): Promise<ReadAllBatch> {
      const from = after === START ? 0 : events.findIndex((e) => e.position === after) + 1;
      const batch = events.slice(from, from + limit);
      reads.push({ limit, bytes: batch.reduce((n, e) => n + eventSizeEstimate(e), 0) });
      return { events: batch, nextPosition: batch.length ? batch[batch.length - 1].position : after };
    },
    headPosition: async () => (events.length ? events[events.length - 1].position : START),
    comparePositions: (a, b) => (a === b ? 0 : a < b ? -1 : 1),
  };
}

/** Reads as one projection does until it has nothing more: the batches' sizes. */
async function readOn(reader: SharedLogReader, from: Position, sizing: ReadSizing): Promise<{ at: Position; sizes: number[] }> {
  const sizes: number[] = [];
  for (;;) {
    const r = await reader.readShared(from, sizing);
    if (r.batch.events.length === 0) return { at: from, sizes };
    sizes.push(r.batch.events.length);
    from = r.batch.nextPosition;
  }
}

describe('regress-review22: a projection behind the runner\'s trimmed tail', () => {
  it('reads the large events the tail dropped a few at a time, not a batch of them', async () => {
    const log = growingLog();
    for (let i = 0; i < 1100; i++) log.events.push(small(i));
    // pollMs 0: every read at the head looks at the log again
    const reader = new SharedLogReader(log, 1000, 0);
    const slow: ReadSizing = { size: 1 };
    const fast: ReadSizing = { size: 1 };
    // the slow projection reads the small events (its size grows to the batch size), then is busy applying them
    const slowAt = (await readOn(reader, START, slow)).at;
    expect(slow.size).toBe(1000);
    // meanwhile bulk chunks are appended, a few at a time, and the other projections read them at the head
    let fastAt = slowAt;
    for (let i = 0; i < 40; i++) {
      for (let k = 0; k < 3; k++) log.events.push(chunk(log.events.length));
      fastAt = (await readOn(reader, fastAt, fast)).at;
    }
    expect(fastAt).toBe(log.events[log.events.length - 1].position);
    expect(reader.tail.has(slowAt)).toBe(false); // the tail dropped the slow projection's place
    const budget = Math.max(...log.reads.map((r) => r.bytes));
    expect(budget).toBeLessThanOrEqual(RUNNER_READ_BYTES + 300_000); // the reads at the head were sized

    // the slow projection reads on: every read within about RUNNER_READ_BYTES (one event more at most)
    log.reads.length = 0;
    const { sizes } = await readOn(reader, slowAt, slow);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(120);
    const largest = Math.max(...log.reads.map((r) => r.bytes));
    expect(largest).toBeLessThanOrEqual(RUNNER_READ_BYTES + 300_000);
  });
});
