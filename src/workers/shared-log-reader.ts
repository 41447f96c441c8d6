// The log read once for all of a runner's projections: the stretch last read, kept in memory (LogTail), and the
// coalesced reads that serve and extend it (SharedLogReader), so one query feeds every projection at the same place.
import type { Position, ReadAllBatch, RecordedEvent } from '../ports/event-store';
import { START } from '../ports/event-store';
import type { LogReader } from '../projections/projection';
import { eventSizeEstimate, nextReadSize } from '../projections/read-sizes';

/**
 * About how many characters of JSON one read of the runner may bring (nextReadSize): less than a rebuild's
 * READ_BYTES, as each projection behind the tail reads on its own, all at once (10 projections catching up over
 * large events: 10 reads, plus the tail's 2 × RUNNER_READ_BYTES). 1,000 events of up to 2 KB still make one read.
 */
export const RUNNER_READ_BYTES = 2 * 1024 * 1024;

/**
 * How many events a reader's next read of the log asks for (`size`): from the largest event it was last given
 * (nextReadSize: about RUNNER_READ_BYTES a read, the runner's batch size while events are small), 1 at first.
 */
export interface ReadSizing {
  size: number;
}

/** A ProjectionRunner's reads of the log, shared by its projections. */
export class SharedLogReader {
  /** the log as far as this runner read it last (shared by the projections); `readEpoch` moves on every kick */
  readonly tail: LogTail;
  private readonly tailRead: { current?: { epoch: number; done: Promise<void> }; queued?: Promise<void> } = {};
  readEpoch = 0;
  /** the size of the reads that extend the tail (ReadSizing) */
  private readonly tailSizing: ReadSizing = { size: 1 };

  constructor(
    private readonly store: LogReader,
    private readonly batchSize: number,
    private readonly pollMs: number,
  ) {
    this.tail = new LogTail(this.batchSize, (a, b) => store.comparePositions(a, b));
  }

  /**
   * The events after `from`, as `readAll` gives them, served from the tail of the log this runner read last when
   * it can: every projection reads the same log, so one query (coalesced: at most one in flight plus one queued)
   * feeds all of them. `stale`: the events came from a tail read before the latest kick; the caller looks again.
   * `full`: more events may follow at once (a read that came back full, or a full batch of the tail, or the tail
   * served to its end when its last read was full). `sizing`: the caller's own (a projection's), for the reads made
   * for it alone (it is behind the tail, or ahead of it), set from the events it was given.
   */
  async readShared(from: Position, sizing: ReadSizing): Promise<{ batch: ReadAllBatch; stale: boolean; full: boolean }> {
    const t = this.tail;
    if (t.has(from)) {
      const batch = t.after(from, this.batchSize, sizing);
      if (batch.events.length > 0) return { batch, stale: t.epoch !== this.readEpoch, full: batch.events.length >= this.batchSize || !t.complete };
      // fresh: read after the latest kick, and recently (a poll must look again: other processes' appends, and
      // events an older transaction held back, wake no one here)
      if (t.epoch === this.readEpoch && t.complete && Date.now() - t.readAt < this.pollMs / 2) return { batch, stale: false, full: false };
      await this.extendTail();
      if (t.has(from)) {
        const extended = t.after(from, this.batchSize, sizing);
        return { batch: extended, stale: false, full: extended.events.length >= this.batchSize || !t.complete };
      }
    }
    // behind the tail: the events it dropped are read again, as many as fit RUNNER_READ_BYTES by the sizes it
    // read them at (regression review 22: a size grown over small events brought a batch of large ones at once)
    const limit = t.fitting(from, sizing.size, RUNNER_READ_BYTES);
    const batch = await this.readIntoTail(from, sizing, limit);
    return { batch, stale: false, full: batch.events.length >= limit };
  }

  /**
   * readAll from `from`, `limit` events (`sizing.size`), offered to the tail (which keeps it when it continues or is
   * ahead of what it holds); `sizing` (and the tail's own, when the tail kept it) sized from the largest event read.
   */
  private async readIntoTail(from: Position, sizing: ReadSizing, limit = sizing.size): Promise<ReadAllBatch> {
    const epoch = this.readEpoch;
    const readAt = Date.now();
    const batch = await this.store.readAll(from, limit);
    // one estimate per event read (not per projection): the next read's size, and the tail's bound in bytes
    const sizes = new Array<number>(batch.events.length);
    let largest = 0;
    for (let i = 0; i < sizes.length; i++) {
      const size = eventSizeEstimate(batch.events[i]);
      sizes[i] = size;
      if (size > largest) largest = size;
    }
    // an empty read says nothing of the events to come: the size stays
    const next = sizes.length > 0 ? nextReadSize(limit, largest, this.batchSize, RUNNER_READ_BYTES) : limit;
    sizing.size = next;
    if (this.tail.adopt(from, batch, epoch, readAt, limit, sizes)) this.tailSizing.size = next;
    return batch;
  }

  /** Reads the log after the tail's end: joins the read in flight if it started after the latest kick, else queues one. */
  private extendTail(): Promise<void> {
    if (this.tailRead.queued) return this.tailRead.queued;
    const current = this.tailRead.current;
    if (current && current.epoch === this.readEpoch) return current.done;
    const start = (): Promise<void> => {
      this.tailRead.queued = undefined;
      const entry = { epoch: this.readEpoch, done: this.readIntoTail(this.tail.end, this.tailSizing).then(() => undefined) };
      this.tailRead.current = entry;
      const settle = () => {
        if (this.tailRead.current === entry) this.tailRead.current = undefined;
      };
      entry.done.then(settle, settle);
      return entry.done;
    };
    if (!current) return start();
    const queued = current.done.then(start, start);
    this.tailRead.queued = queued;
    return queued;
  }
}

/**
 * The most recent stretch of the log a runner read: events in order, contiguous from `start` (exclusive) to `end`,
 * as readAll returned them (so never past an event a late commit could still precede). Bounded: the oldest events
 * are dropped beyond a few batches, or beyond 2 × RUNNER_READ_BYTES of events (estimated: eventSizeEstimate), down
 * to RUNNER_READ_BYTES (review 20: it kept up to 4,000 events whatever their size).
 */
export class LogTail {
  private events: RecordedEvent[] = [];
  /** eventSizeEstimate of each of `events`, and their sum */
  private sizes: number[] = [];
  private bytes = 0;
  /** position → index in `events` + offset */
  private readonly index = new Map<Position, number>();
  private offset = 0;
  /**
   * The positions and sizes of the events dropped last (oldest first, up to the tail's `start`; at most 4 batches):
   * a projection left behind reads them again, sized by what they were (`fitting`). Cleared with a new tail.
   */
  private trail: { positions: Position[]; sizes: number[]; index: Map<Position, number>; offset: number } = emptyTrail();
  private start: Position | undefined;
  end: Position = START;
  epoch = -1;
  /** when (ms) the read that last extended the tail started */
  readAt = 0;
  /** the last read returned less than a full batch: nothing more was readable then */
  complete = false;

  constructor(
    private readonly batchSize: number,
    private readonly compare: (a: Position, b: Position) => number,
  ) {}

  has(from: Position): boolean {
    return this.start !== undefined && (from === this.start || this.index.has(from));
  }

  /** Whether the tail holds an event after `from` that satisfies `test`. */
  hasAfter(from: Position, test: (e: RecordedEvent) => boolean): boolean {
    if (!this.has(from)) return false;
    for (let i = from === this.start ? 0 : this.index.get(from)! + 1 - this.offset; i < this.events.length; i++) {
      if (test(this.events[i])) return true;
    }
    return false;
  }

  /** Up to `limit` events after `from`; `sizing` (ReadSizing) set from the largest of them, when there are some. */
  after(from: Position, limit: number, sizing?: ReadSizing): ReadAllBatch {
    const i = from === this.start ? 0 : this.index.get(from)! + 1 - this.offset;
    const events = this.events.slice(i, i + limit);
    if (sizing && events.length > 0) {
      let largest = 0;
      for (let j = i; j < i + events.length; j++) if (this.sizes[j] > largest) largest = this.sizes[j];
      sizing.size = nextReadSize(sizing.size, largest, this.batchSize, RUNNER_READ_BYTES);
    }
    return { events, nextPosition: events.length > 0 ? events[events.length - 1].position : from };
  }

  /**
   * How many of the next `limit` events after `from`, a position the tail dropped (its trail), fit `bytes` by the
   * sizes it read them at (at least one); `limit` when `from` is not in the trail, or all the events it knows fit.
   */
  fitting(from: Position, limit: number, bytes: number): number {
    const t = this.trail;
    const at = t.index.get(from);
    if (at === undefined) return limit;
    let sum = 0;
    let count = 0;
    for (let j = at + 1 - t.offset; count < limit && j < t.sizes.length + this.sizes.length; j++, count++) {
      const size = j < t.sizes.length ? t.sizes[j] : this.sizes[j - t.sizes.length];
      if (count > 0 && sum + size > bytes) return count;
      sum += size;
    }
    return limit;
  }

  /**
   * Takes a read's result (that asked for `limit` events; `sizes`: their eventSizeEstimate): extends the tail when it
   * continues it, starts a new tail when it is ahead of it.
   */
  adopt(from: Position, batch: ReadAllBatch, epoch: number, readAt: number, limit: number, sizes: readonly number[]): boolean {
    if (this.start === undefined || (from !== this.end && this.compare(from, this.end) > 0)) {
      this.events = [];
      this.sizes = [];
      this.bytes = 0;
      this.index.clear();
      this.offset = 0;
      this.trail = emptyTrail();
      this.start = from;
      this.end = from;
      this.epoch = -1;
      this.readAt = 0;
    } else if (from !== this.end) {
      return false; // a read behind the tail (a projection catching up): not part of it
    }
    for (let i = 0; i < batch.events.length; i++) {
      const e = batch.events[i];
      this.index.set(e.position, this.offset + this.events.length);
      this.events.push(e);
      this.sizes.push(sizes[i]);
      this.bytes += sizes[i];
    }
    this.end = batch.nextPosition;
    this.epoch = Math.max(this.epoch, epoch);
    this.readAt = Math.max(this.readAt, readAt);
    this.complete = batch.events.length < limit;
    if (this.events.length > 4 * this.batchSize || this.bytes > 2 * RUNNER_READ_BYTES) {
      // keep the newest batchSize events, and of those no more than RUNNER_READ_BYTES (at least the newest event)
      let keep = Math.min(this.events.length, this.batchSize);
      let kept = 0;
      for (let i = this.events.length - 1; i >= this.events.length - keep; i--) {
        if (kept + this.sizes[i] > RUNNER_READ_BYTES && kept > 0) {
          keep = this.events.length - 1 - i;
          break;
        }
        kept += this.sizes[i];
      }
      const drop = this.events.length - keep;
      // nothing to drop when the tail is one event larger than the bound (regression review 21: the position of
      // the last dropped event was read from none, and every read extending the tail threw)
      if (drop > 0) {
        const dropped = this.events.splice(0, drop);
        const droppedSizes = this.sizes.splice(0, drop);
        for (const e of dropped) this.index.delete(e.position);
        for (const size of droppedSizes) this.bytes -= size;
        this.offset += dropped.length;
        this.start = dropped[dropped.length - 1].position;
        this.keepInTrail(dropped, droppedSizes);
      }
    }
    return true;
  }

  /** Adds the dropped events' positions and sizes to the trail, which keeps the newest 4 batches of them. */
  private keepInTrail(dropped: readonly RecordedEvent[], sizes: readonly number[]): void {
    const t = this.trail;
    for (let i = 0; i < dropped.length; i++) {
      t.index.set(dropped[i].position, t.offset + t.positions.length);
      t.positions.push(dropped[i].position);
      t.sizes.push(sizes[i]);
    }
    const over = t.positions.length - 4 * this.batchSize;
    if (over > 0) {
      for (const p of t.positions.splice(0, over)) t.index.delete(p);
      t.sizes.splice(0, over);
      t.offset += over;
    }
  }
}

const emptyTrail = () => ({ positions: [] as Position[], sizes: [] as number[], index: new Map<Position, number>(), offset: 0 });
