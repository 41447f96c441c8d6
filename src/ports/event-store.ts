// The event store port. Commands and projections depend on this file only; adapters live in
// src/adapters/event-store/{postgres,esdb}.ts and are picked by the composition root.

/** Opaque, adapter-owned, serialisable as text. Never a JS number. */
export type Position = string & { readonly __brand: 'Position' };

export const START: Position = '' as Position;

export type ExpectedRevision = 'no_stream' | 'exists' | 'any' | bigint;

export interface EventMetadata {
  eventId: string;
  correlationId: string;
  causationId: string | null;
  companyId: number | null;
  /** api key id, `system`, `provider`, `cli` */
  actor: string;
  /** ISO 8601 */
  at: string;
  schemaVersion?: number;
}

export interface EventToAppend {
  type: string;
  data: unknown;
  metadata: EventMetadata;
}

export interface RecordedEvent<T extends string = string, D = unknown> {
  type: T;
  data: D;
  metadata: EventMetadata;
  streamId: string;
  /** 0-based revision of the event within its stream */
  revision: bigint;
  position: Position;
}

export interface AppendResult {
  /** revision of the last event now in the stream */
  nextRevision: bigint;
  /** position of the last appended event (or of the already stored one when idempotent) */
  position: Position;
  /** true when every event id was already stored: nothing was appended */
  alreadyAppended: boolean;
}

/** One stream's part of an `appendMany`. */
export interface StreamAppend {
  streamId: string;
  events: EventToAppend[];
  expected: ExpectedRevision;
}

export interface ReadAllBatch {
  events: RecordedEvent[];
  /** position to pass as `after` on the next call; equals `after` when nothing was read */
  nextPosition: Position;
}

export interface EventStore {
  readonly kind: 'postgres' | 'esdb';
  /**
   * True when `appendMany` is all or nothing across its streams (one transaction): when it throws, nothing was
   * appended. False when the entries are appended one after the other, so a failure may leave earlier ones stored.
   */
  readonly appendManyIsAtomic: boolean;
  append(streamId: string, events: EventToAppend[], expected: ExpectedRevision): Promise<AppendResult>;
  /**
   * Appends to several distinct streams, each with its own expected revision; results in the order of `appends`.
   * Each entry behaves like `append` (an entry whose event ids are all stored in that stream already is
   * recognised: `alreadyAppended`, its expectation is not checked). Postgres: one statement, all or nothing: when
   * it throws, nothing was appended. EventStoreDB: the entries are appended one after the other, so when it throws
   * the entries before the failing one may be stored (deterministic event ids let a retry recognise them).
   * Throws WrongExpectedRevisionError when an entry's expectation fails, DuplicateEventIdError when an event id
   * is stored already but its entry is not (part of it, or in another stream).
   */
  appendMany(appends: StreamAppend[]): Promise<AppendResult[]>;
  /** all events of a stream in revision order, from `fromRevision` (default 0) */
  readStream(streamId: string, fromRevision?: bigint): Promise<RecordedEvent[]>;
  /** all events of each stream in revision order, keyed by stream id (every requested id; [] when unknown) */
  readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>>;
  /**
   * events in global order strictly after `after` (START = beginning); never skips a late commit. Throws
   * InvalidPositionError, before reading anything, when `after` is not one of this store's positions.
   */
  readAll(after: Position, limit: number): Promise<ReadAllBatch>;
  /** position of the newest committed event (START when empty); readAll reaches it once older transactions end */
  headPosition(): Promise<Position>;
  /** number of events after `after` up to the head (for lag) */
  countAfter(after: Position): Promise<number>;
  /** orders two positions; throws InvalidPositionError for text that is not one of this store's positions */
  comparePositions(a: Position, b: Position): number;
  /** resolves when something may have been appended (in-process or, where supported, by others) */
  onAppended(listener: () => void): () => void;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Text that is not a position of this event store (a `--from` typed by hand); `expected` describes the form. */
export class InvalidPositionError extends Error {
  override name = 'InvalidPositionError';
  constructor(
    readonly position: string,
    readonly expected: string,
    /** the store's name in the message, where it helps (`EventStoreDB`) */
    store?: string,
  ) {
    super(`invalid ${store ? `${store} ` : ''}position ${JSON.stringify(position)}: expected ${expected}`);
  }
}

export class WrongExpectedRevisionError extends Error {
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedRevision,
    readonly actual: bigint | 'no_stream',
  ) {
    super(`wrong expected revision on ${streamId}: expected ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

/** The shape every adapter's `appendMany` requires: each entry has events, no stream appears twice. */
export function checkStreamAppends(appends: readonly StreamAppend[]): void {
  const seen = new Set<string>();
  for (const a of appends) {
    if (a.events.length === 0) throw new Error(`appendMany: the append to ${a.streamId} has no events`);
    if (seen.has(a.streamId)) throw new Error(`appendMany: stream ${a.streamId} appears twice`);
    seen.add(a.streamId);
  }
}

/** An appendMany entry collides with events stored already under the same ids but not as that entry. */
export class DuplicateEventIdError extends Error {
  constructor(
    readonly streamId: string,
    readonly eventIds: string[],
  ) {
    super(`event ids of the append to ${streamId} are stored already, but not as that append: ${eventIds.join(', ')}`);
    this.name = 'DuplicateEventIdError';
  }
}
