// The log read once for all of a runner's projections: the stretch last read, kept in memory (LogTail), and the
// coalesced reads that serve and extend it (SharedLogReader), so one query feeds every projection at the same place.
import type { Position, ReadAllBatch, RecordedEvent } from '../ports/event-store';
import { START } from '../ports/event-store';
import type { LogReader } from '../projections/projection';

/** A ProjectionRunner's reads of the log, shared by its projections. */
export class SharedLogReader {
  /** the log as far as this runner read it last (shared by the projections); `readEpoch` moves on every kick */
  readonly tail: LogTail;
  private readonly tailRead: { current?: { epoch: number; done: Promise<void> }; queued?: Promise<void> } = {};
  readEpoch = 0;

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
   */
  async readShared(from: Position): Promise<{ batch: ReadAllBatch; stale: boolean }> {
    const t = this.tail;
    if (t.has(from)) {
      const batch = t.after(from, this.batchSize);
      if (batch.events.length > 0) return { batch, stale: t.epoch !== this.readEpoch };
      // fresh: read after the latest kick, and recently (a poll must look again: other processes' appends, and
      // events an older transaction held back, wake no one here)
      if (t.epoch === this.readEpoch && t.complete && Date.now() - t.readAt < this.pollMs / 2) return { batch, stale: false };
      await this.extendTail();
      if (t.has(from)) return { batch: t.after(from, this.batchSize), stale: false };
    }
    return { batch: await this.readIntoTail(from), stale: false };
  }

  /** readAll from `from`, offered to the tail (which keeps it when it continues or is ahead of what it holds). */
  private async readIntoTail(from: Position): Promise<ReadAllBatch> {
    const epoch = this.readEpoch;
    const readAt = Date.now();
    const batch = await this.store.readAll(from, this.batchSize);
    this.tail.adopt(from, batch, epoch, readAt);
    return batch;
  }

  /** Reads the log after the tail's end: joins the read in flight if it started after the latest kick, else queues one. */
  private extendTail(): Promise<void> {
    if (this.tailRead.queued) return this.tailRead.queued;
    const current = this.tailRead.current;
    if (current && current.epoch === this.readEpoch) return current.done;
    const start = (): Promise<void> => {
      this.tailRead.queued = undefined;
      const entry = { epoch: this.readEpoch, done: this.readIntoTail(this.tail.end).then(() => undefined) };
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
 * are dropped beyond a few batches.
 */
export class LogTail {
  private events: RecordedEvent[] = [];
  /** position → index in `events` + offset */
  private readonly index = new Map<Position, number>();
  private offset = 0;
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

  after(from: Position, limit: number): ReadAllBatch {
    const i = from === this.start ? 0 : this.index.get(from)! + 1 - this.offset;
    const events = this.events.slice(i, i + limit);
    return { events, nextPosition: events.length > 0 ? events[events.length - 1].position : from };
  }

  /** Takes a read's result: extends the tail when it continues it, starts a new tail when it is ahead of it. */
  adopt(from: Position, batch: ReadAllBatch, epoch: number, readAt: number): void {
    if (this.start === undefined || (from !== this.end && this.compare(from, this.end) > 0)) {
      this.events = [];
      this.index.clear();
      this.offset = 0;
      this.start = from;
      this.end = from;
      this.epoch = -1;
      this.readAt = 0;
    } else if (from !== this.end) {
      return; // a read behind the tail (a projection catching up): not part of it
    }
    for (const e of batch.events) {
      this.index.set(e.position, this.offset + this.events.length);
      this.events.push(e);
    }
    this.end = batch.nextPosition;
    this.epoch = Math.max(this.epoch, epoch);
    this.readAt = Math.max(this.readAt, readAt);
    this.complete = batch.events.length < this.batchSize;
    if (this.events.length > 4 * this.batchSize) {
      const dropped = this.events.splice(0, this.events.length - this.batchSize);
      for (const e of dropped) this.index.delete(e.position);
      this.offset += dropped.length;
      this.start = dropped[dropped.length - 1].position;
    }
  }
}
