// Group commit of stream creations (appends at `no_stream`) in the Postgres event store (docs/core.md, "Event
// store"). While a batch statement is running, the creations that arrive wait and then go together, as one
// appendMany (one statement, one commit) instead of one statement each. Under no load a creation goes alone at
// once, so it waits for nothing; under load the round trip and the commit are shared. Each caller gets exactly
// what its own append would have given: when the batch fails because of one entry (another writer created that
// stream first, or its event ids are stored elsewhere), every entry is appended again on its own.
import { DuplicateEventIdError, type AppendResult, type StreamAppend, WrongExpectedRevisionError } from '../../ports/event-store';

export interface CreationGroupCommitOptions {
  /** appends one stream (the store's own single append) */
  appendOne(append: StreamAppend): Promise<AppendResult>;
  /** appends several distinct streams in one statement, all or nothing */
  appendMany(appends: StreamAppend[]): Promise<AppendResult[]>;
  /** batch statements running at once */
  maxInFlight?: number;
  /** entries per batch statement */
  maxBatch?: number;
}

interface Waiting {
  append: StreamAppend;
  resolve(result: AppendResult): void;
  reject(err: unknown): void;
}

/** An entry's own failure inside a batch: the others may still go, each on its own. */
const isEntryFailure = (err: unknown): boolean => err instanceof WrongExpectedRevisionError || err instanceof DuplicateEventIdError;

export class CreationGroupCommit {
  private queue: Waiting[] = [];
  private inFlight = 0;
  private readonly maxInFlight: number;
  private readonly maxBatch: number;
  /** batch statements run, and the creations they carried (for tests and tuning) */
  readonly stats = { batches: 0, creations: 0 };

  constructor(private readonly options: CreationGroupCommitOptions) {
    this.maxInFlight = options.maxInFlight ?? 1;
    this.maxBatch = options.maxBatch ?? 64;
  }

  append(append: StreamAppend): Promise<AppendResult> {
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ append, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.takeBatch();
      this.inFlight++;
      this.stats.batches++;
      this.stats.creations += batch.length;
      void this.flush(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  /**
   * Up to maxBatch waiting creations, in arrival order, no two of one stream or with an event id in common (the
   * store would refuse the whole statement, and only one of them may succeed): such a one waits for the next batch.
   */
  private takeBatch(): Waiting[] {
    const batch: Waiting[] = [];
    const rest: Waiting[] = [];
    const streams = new Set<string>();
    const eventIds = new Set<string>();
    for (const w of this.queue) {
      // ids only of creations that may still join: a long queue behind a full batch is only carried over
      const mayJoin = batch.length < this.maxBatch && !streams.has(w.append.streamId);
      const ids = mayJoin ? w.append.events.map((e) => e.metadata.eventId.toLowerCase()) : undefined;
      if (ids !== undefined && !ids.some((id) => eventIds.has(id))) {
        streams.add(w.append.streamId);
        for (const id of ids) eventIds.add(id);
        batch.push(w);
      } else rest.push(w);
    }
    this.queue = rest;
    return batch;
  }

  private async flush(batch: Waiting[]): Promise<void> {
    if (batch.length === 1) return this.alone(batch[0]);
    // streams in a fixed order, so two processes' batches take their index entries in the same order (no deadlock)
    const sorted = [...batch].sort((a, b) => (a.append.streamId < b.append.streamId ? -1 : 1));
    let results: AppendResult[];
    try {
      results = await this.options.appendMany(sorted.map((w) => w.append));
    } catch (err) {
      if (!isEntryFailure(err)) {
        for (const w of sorted) w.reject(err);
        return;
      }
      // nothing was appended: each entry on its own, so that only the failing one fails
      await Promise.all(sorted.map((w) => this.alone(w)));
      return;
    }
    sorted.forEach((w, i) => w.resolve(results[i]));
  }

  private async alone(w: Waiting): Promise<void> {
    try {
      w.resolve(await this.options.appendOne(w.append));
    } catch (err) {
      w.reject(err);
    }
  }
}
