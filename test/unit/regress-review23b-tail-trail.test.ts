import type { Position, RecordedEvent } from '../../src/ports/event-store';
import { START } from '../../src/ports/event-store';
import { LogTail, RUNNER_READ_BYTES } from '../../src/workers/shared-log-reader';

// Regression review 23b of ed3ef8c (guards, found sound): the runner's tail keeps the positions and sizes of the events
// it dropped last (its trail, at most 4 batches), and a projection behind it reads as many of them as fit
// RUNNER_READ_BYTES. Checked: a position dropped longer ago than the trail keeps, or one of an old tail after a new
// one started, is sized as before (the projection's own size); a position inside the trail counts on into the tail.

const pos = (i: number) => `${i}:0` as Position;
const ev = (i: number): RecordedEvent => ({ position: pos(i), streamId: 's', revision: 0n, type: 'T', data: {}, metadata: {} } as unknown as RecordedEvent);
const compare = (a: Position, b: Position) => (a === START ? -1 : b === START ? 1 : Number(a.split(':')[0]) - Number(b.split(':')[0]));

/** A tail of batch `batch`, fed events from..to (inclusive) in reads of `batch`, each event `size(i)` characters. */
function fed(tail: LogTail, from: number, to: number, batch: number, size: (i: number) => number): void {
  let after: Position = from === 1 ? START : pos(from - 1);
  for (let i = from; i <= to; i += batch) {
    const events = Array.from({ length: Math.min(batch, to - i + 1) }, (_, k) => ev(i + k));
    tail.adopt(after, { events, nextPosition: events[events.length - 1].position }, 0, 0, batch, events.map((e) => size(Number(e.position.split(':')[0]))));
    after = events[events.length - 1].position;
  }
}

describe('regress-review23b: the tail\'s trail of dropped events', () => {
  const big = Math.floor(RUNNER_READ_BYTES / 4); // four fit a read

  it('a position in the trail: as many as fit, counted on into the tail', () => {
    const tail = new LogTail(10, compare);
    fed(tail, 1, 60, 10, () => big);
    expect(tail.has(pos(58))).toBe(true); // the tail keeps RUNNER_READ_BYTES: 57..60
    expect(tail.has(pos(50))).toBe(false);
    expect(tail.fitting(pos(50), 10, RUNNER_READ_BYTES)).toBe(4);
  });

  it('one event larger than the budget: one', () => {
    const tail = new LogTail(10, compare);
    fed(tail, 1, 60, 10, () => RUNNER_READ_BYTES * 3);
    expect(tail.fitting(pos(30), 10, RUNNER_READ_BYTES)).toBe(1);
  });

  it('small events: the size asked', () => {
    const tail = new LogTail(10, compare);
    fed(tail, 1, 100, 10, () => 100);
    expect(tail.fitting(pos(55), 7, RUNNER_READ_BYTES)).toBe(7);
  });

  it('dropped longer ago than 4 batches: not known, the size asked', () => {
    const tail = new LogTail(10, compare);
    fed(tail, 1, 200, 10, () => big);
    expect(tail.fitting(pos(20), 10, RUNNER_READ_BYTES)).toBe(10);
    expect(tail.fitting(pos(198), 10, RUNNER_READ_BYTES)).toBe(10); // in the tail, not the trail: served from it
    expect(tail.fitting(pos(195), 10, RUNNER_READ_BYTES)).toBe(4); // the trail's newest
  });

  it('after a new tail started ahead, an old trail position is not sized by it', () => {
    const tail = new LogTail(10, compare);
    fed(tail, 1, 60, 10, () => big);
    expect(tail.fitting(pos(50), 10, RUNNER_READ_BYTES)).toBe(4);
    const ahead = [ev(500), ev(501)];
    tail.adopt(pos(499), { events: ahead, nextPosition: pos(501) }, 0, 0, 10, [10, 10]);
    expect(tail.has(pos(500))).toBe(true);
    expect(tail.fitting(pos(50), 10, RUNNER_READ_BYTES)).toBe(10);
  });
});
