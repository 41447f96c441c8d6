import type { Position, ReadAllBatch, RecordedEvent } from '../../src/ports/event-store';
import { START } from '../../src/ports/event-store';
import type { LogReader } from '../../src/projections/projection';
import { eventSizeEstimate, nextReadSize, READ_BYTES } from '../../src/projections/read-sizes';
import { type ReadSizing, RUNNER_READ_BYTES, SharedLogReader } from '../../src/workers/shared-log-reader';

// Review 20: the projection runner's reads are sized by their events (test/e2e/review20-memory-catchup.test.ts checks
// the memory itself, with a small heap). Here: small events are still read 1,000 at a time (after a first read of
// one, doubling), large ones a few at a time, and the shared tail of the log no longer keeps thousands of them.

const pos = (i: number) => String(i).padStart(10, '0') as Position;

function event(i: number, data: unknown): RecordedEvent {
  return {
    type: 'BulkRecipientsAdded', data, streamId: `s-${i}`, revision: 0n, position: pos(i + 1),
    metadata: { eventId: `e${i}`, correlationId: 'c', causationId: null, companyId: 7, actor: 'system', at: '2026-11-28T12:00:00.000Z' } as never,
  };
}

const small = (i: number) => event(i, { messageId: `wamid.${i}`, companyId: 7, to: '+5491112345678', template: { name: 'order_update', variables: { '1': 'Juan' } } });
const chunk = (i: number) => event(i, {
  bulkId: '00000000-0000-4000-8000-000000000020', companyId: 7, chunk: i,
  recipients: Array.from({ length: 100 }, (_, r) => ({ index: i * 100 + r, phone: '+5491100000000', variables: { '1': `${i}:${r}`.padEnd(2500, 'x') }, buttonVariables: {} })),
});

/** An in-memory log that records the limit of every read. */
function logOf(events: RecordedEvent[]): LogReader & { limits: number[] } {
  const limits: number[] = [];
  return {
    limits,
    async readAll(after: Position, limit: number): Promise<ReadAllBatch> {
      limits.push(limit);
      const from = after === START ? 0 : events.findIndex((e) => e.position === after) + 1;
      const batch = events.slice(from, from + limit);
      return { events: batch, nextPosition: batch.length ? batch[batch.length - 1].position : after };
    },
    headPosition: async () => (events.length ? events[events.length - 1].position : START),
    comparePositions: (a, b) => (a === b ? 0 : a < b ? -1 : 1),
  };
}

/** Reads the whole log as one projection does: the batches' sizes, and whether each said more follows. */
async function readThrough(reader: SharedLogReader, sizing: ReadSizing): Promise<{ sizes: number[]; full: boolean[] }> {
  const sizes: number[] = [];
  const full: boolean[] = [];
  let from = START;
  for (;;) {
    const r = await reader.readShared(from, sizing);
    if (r.batch.events.length === 0) return { sizes, full };
    sizes.push(r.batch.events.length);
    full.push(r.full);
    from = r.batch.nextPosition;
  }
}

describe('review20: sized reads of the log', () => {
  it('estimates an event near its JSON size without serializing it (a bulk chunk and a small event)', () => {
    for (const e of [chunk(3), small(3)]) {
      const json = JSON.stringify(e.data).length;
      expect(Math.abs(eventSizeEstimate(e) - json) / json).toBeLessThan(0.1);
    }
    expect(JSON.stringify(chunk(3).data).length).toBeGreaterThan(250_000);
  });

  it('small events: the runner still reads 1,000 a read (after 1, 2, 4 … 512), every read but the last full', async () => {
    const log = logOf(Array.from({ length: 6000 }, (_, i) => small(i)));
    const { sizes, full } = await readThrough(new SharedLogReader(log, 1000, 100), { size: 1 });
    const ramp = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];
    const rest = 6000 - ramp.reduce((a, b) => a + b, 0);
    expect(sizes).toEqual([...ramp, ...Array(Math.floor(rest / 1000)).fill(1000), rest % 1000]);
    expect(full).toEqual([...Array(sizes.length - 1).fill(true), false]);
    expect(log.limits.slice(0, 12)).toEqual([...ramp, 1000, 1000]);
  });

  it('chunks of 256 KiB: a few a read (RUNNER_READ_BYTES), and the tail keeps no more than a few MB of them', async () => {
    const events = Array.from({ length: 200 }, (_, i) => chunk(i));
    const log = logOf(events);
    const reader = new SharedLogReader(log, 1000, 100);
    const { sizes, full } = await readThrough(reader, { size: 1 });
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(200);
    const most = Math.floor(RUNNER_READ_BYTES / 250_000);
    expect(Math.max(...log.limits)).toBeLessThanOrEqual(most);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(most);
    expect(full.slice(0, -1).every(Boolean)).toBe(true);
    // the tail dropped the oldest: it holds at most 2 × RUNNER_READ_BYTES (it held up to 4,000 events before)
    const held = events.filter((e, i) => reader.tail.has(i === 0 ? START : events[i - 1].position)).length;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(Math.ceil((2 * RUNNER_READ_BYTES) / 250_000) + 1);
  });

  it('nextReadSize: doubles up to the cap while events are small, READ_BYTES of large ones, at least one', () => {
    expect(nextReadSize(1, 300, 2000)).toBe(2);
    expect(nextReadSize(1024, 300, 2000)).toBe(2000);
    expect(nextReadSize(2000, 1_500_000, 2000)).toBe(Math.floor(READ_BYTES / 1_500_000));
    expect(nextReadSize(5, 40 * 1024 * 1024, 2000)).toBe(1);
  });
});
