// EventStoreDB adapter of the event-store port (src/ports/event-store.ts), over @eventstore/db-client.
//
// Mapping (ARCHITECTURE section 4):
// - append      → appendToStream with expectedRevision NO_STREAM / STREAM_EXISTS / ANY / bigint; event id =
//                 metadata.eventId (a UUID; any other string is mapped to a deterministic name-based UUID), data and
//                 metadata as JSON (our EventMetadata is the ESDB event metadata). WrongExpectedVersionError →
//                 WrongExpectedRevisionError.
// - appendMany  → one append per entry, one after the other (ESDB has no multi-stream transaction): not atomic; when
//                 an entry fails, the entries before it stay appended (callers use deterministic event ids, so a
//                 retry recognises them: `alreadyAppended`).
// - readStream  → readStream (StreamNotFoundError → []); readStreams → concurrent readStream calls.
// - readAll     → readAll forwards from the given position (esdb-read-all.ts). ESDB reads forwards *inclusively*, the
//                 port is strictly after, so the event at `after` is dropped. System events (type or stream starting
//                 with `$`) are skipped on the client (readAll has no server-side filter in this client version), but
//                 they still advance `nextPosition`; the read goes on until it has an event of ours or reaches the end
//                 of $all, and stretches found to hold system events only are remembered (SystemRuns), so a poll from
//                 the same checkpoint does not read them again.
// - positions   → `${commit}/${prepare}` (decimal bigints below 2^64-1); START ('') sorts before
//                 everything. A read that answers the uint64 maximum ("no position") gives no position.
// - onAppended  → in-process listeners, fired after each successful append, plus (unless disabled) a subscribeToAll
//                 with excludeSystemEvents() that fires them when another process appends.
//
// Idempotent retries. ESDB acknowledges a retried append (same event ids, same expected revision) as a success
// without writing anything, and its answer looks exactly like a fresh write. To report `alreadyAppended` the adapter
// therefore reads, before appending, the n stored events where the batch would have gone (revision expected+1 for
// a revision, 0 for no_stream, the stream's last n events for any/exists): if their ids are the batch's ids, nothing
// is appended and the stored events' revision and position are returned. Cost: one extra small read per append
// (usually answered "nothing there" / StreamNotFound). After a WrongExpectedVersion the same check runs again
// (aligned, then on the stream's tail), so a retry whose events are already stored is recognised rather than
// reported as a conflict. A retry racing its own original between the pre-read and the append is still not
// duplicated (ESDB's own idempotency), it is only reported as `alreadyAppended: false`.
//
// Requirements: EventStoreDB ≥ 22.6 (stream reads carry event positions); tested images: 23.10 / 24.10.

import { createHash } from 'node:crypto';
import {
  ANY,
  BACKWARDS,
  END,
  ErrorType,
  EventStoreDBClient,
  FORWARDS,
  NO_STREAM,
  START as ESDB_START,
  STREAM_EXISTS,
  StreamNotFoundError,
  WrongExpectedVersionError,
  excludeSystemEvents,
  jsonEvent,
  type AllStreamSubscription,
  type AppendExpectedRevision,
  type JSONType,
  type Position as EsdbPosition,
  type ReadPosition,
  type ReadRevision,
} from '@eventstore/db-client';
import {
  type AppendResult,
  checkStreamAppends,
  type EventMetadata,
  type EventStore,
  type EventToAppend,
  type ExpectedRevision,
  type Position,
  type ReadAllBatch,
  type RecordedEvent,
  START,
  type StreamAppend,
  WrongExpectedRevisionError,
} from '../../ports/event-store';
import { AppendRefusedError, assertAppended, portActualRevision } from './esdb-append-outcome';
import {
  cmpEsdb,
  decodeEsdbPosition,
  encodeEsdbPosition,
  esdbEventPosition,
  isSystemEvent,
  readAllPages,
  SystemRuns,
} from './esdb-read-all';

export { decodeEsdbPosition, encodeEsdbPosition } from './esdb-read-all';

/** The part of the client this adapter uses (lets tests inject a client). */
export type EsdbClient = Pick<EventStoreDBClient, 'appendToStream' | 'readStream' | 'readAll' | 'subscribeToAll' | 'dispose'>;

export interface EsdbEventStoreOptions {
  /** e.g. `esdb://localhost:2113?tls=false`; ignored when `client` is given */
  connectionString?: string;
  /** an existing client; by default the store does not dispose it on close (see `ownsClient`) */
  client?: EsdbClient;
  /** dispose the client on close (default: true when the store created it, false for an injected client) */
  ownsClient?: boolean;
  /** subscribe to $all (system events excluded) so onAppended also fires for other processes' appends (default true) */
  watchOthers?: boolean;
  /** countAfter stops counting here and returns this number (default 100,000) */
  countAfterLimit?: number;
  /** deadline of ping(), ms (default 5,000) */
  pingDeadlineMs?: number;
}

// ---------------------------------------------------------------------------------------------------------------
// Positions

/** Orders positions by (commit, prepare) as bigints; START is before every other position. */
export function compareEsdbPositions(a: Position, b: Position): number {
  const pa = decodeEsdbPosition(a);
  const pb = decodeEsdbPosition(b);
  if (pa === null) return pb === null ? 0 : -1;
  if (pb === null) return 1;
  return cmpEsdb(pa, pb);
}

// ---------------------------------------------------------------------------------------------------------------
// Event ids

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/**
 * ESDB event ids are UUIDs. A UUID eventId is used as is (lower-cased); anything else (or the nil UUID, which ESDB
 * rejects) becomes a deterministic name-based UUID (SHA-1, version 5 layout), so retries of the same record still
 * carry the same id. The original eventId stays in the metadata and is what readers see.
 */
export function esdbEventId(eventId: string): string {
  if (UUID_RE.test(eventId) && eventId !== NIL_UUID) return eventId.toLowerCase();
  const h = createHash('sha1').update('switchboard/event-id\u0000').update(eventId, 'utf8').digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Conversions

/** The fields of the client's recorded events this adapter reads (JSON and binary events alike). */
interface EsdbRecorded {
  streamId: string;
  id: string;
  type: string;
  revision: bigint;
  created: Date;
  isJson: boolean;
  data: unknown;
  metadata: unknown;
  position?: EsdbPosition;
}

interface EsdbResolved {
  event?: EsdbRecorded;
  commitPosition?: bigint;
}

function decodeBytes(bytes: Uint8Array): unknown {
  const text = Buffer.from(bytes).toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function toMetadata(e: EsdbRecorded): EventMetadata {
  const raw = e.metadata instanceof Uint8Array ? decodeBytes(e.metadata) : e.metadata;
  const fallback: EventMetadata = {
    eventId: e.id,
    correlationId: e.id,
    causationId: null,
    companyId: null,
    actor: 'system',
    at: e.created instanceof Date && !Number.isNaN(e.created.getTime()) ? e.created.toISOString() : new Date(0).toISOString(),
  };
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return fallback;
  const m = raw as Partial<EventMetadata>;
  if (typeof m.eventId === 'string') return m as EventMetadata;
  return { ...fallback, ...m, eventId: e.id };
}

/** Older servers answer stream reads without event positions (the uint64 maximum): undefined then. */
const positionOf = (r: EsdbResolved): EsdbPosition | undefined => esdbEventPosition(r);

function toRecorded(e: EsdbRecorded, position: Position): RecordedEvent {
  return {
    type: e.type,
    data: e.isJson || !(e.data instanceof Uint8Array) ? e.data : decodeBytes(e.data),
    metadata: toMetadata(e),
    streamId: e.streamId,
    revision: e.revision,
    position,
  };
}

function toEsdbExpected(expected: ExpectedRevision): AppendExpectedRevision {
  switch (expected) {
    case 'no_stream':
      return NO_STREAM;
    case 'exists':
      return STREAM_EXISTS;
    case 'any':
      return ANY;
    default:
      if (typeof expected !== 'bigint' || expected < 0n) throw new RangeError(`invalid expected revision ${String(expected)}`);
      return expected;
  }
}

function isWrongExpectedVersion(err: unknown): err is WrongExpectedVersionError {
  return (
    err instanceof WrongExpectedVersionError ||
    (typeof err === 'object' && err !== null && (err as { type?: unknown }).type === ErrorType.WRONG_EXPECTED_VERSION)
  );
}

function isStreamNotFound(err: unknown): boolean {
  return (
    err instanceof StreamNotFoundError ||
    (typeof err === 'object' && err !== null && (err as { type?: unknown }).type === ErrorType.STREAM_NOT_FOUND)
  );
}

// ---------------------------------------------------------------------------------------------------------------

const HEAD_PAGE = 256;
/** How much earlier than a batch's own time (our clock) the server may have stamped its first try (its clock). */
const RETRY_LOOKBACK_SKEW_MS = 60_000;
/** At most this many of a stream's latest events are searched for a batch stored already, a page at a time. */
const RETRY_LOOKBACK_MAX = 1_000;
const RETRY_LOOKBACK_PAGE = 32;

/** The earliest time a batch can have been stored at, on the server's clock: its events' own time less the skew. */
function earliestStoreTime(events: EventToAppend[]): number | undefined {
  const times = events.map((e) => Date.parse(e.metadata.at));
  if (times.some((t) => Number.isNaN(t))) return undefined;
  return Math.min(...times) - RETRY_LOOKBACK_SKEW_MS;
}

const storedBefore = (e: EsdbRecorded, notBefore: number): boolean =>
  !(e.created instanceof Date) || Number.isNaN(e.created.getTime()) || e.created.getTime() < notBefore;
const READ_STREAMS_CONCURRENCY = 32;
const COUNT_PAGE = 4096;

export class EsdbEventStore implements EventStore {
  readonly kind = 'esdb' as const;
  readonly appendManyIsAtomic = false;

  private readonly client: EsdbClient;
  private readonly ownsClient: boolean;
  private readonly watchOthers: boolean;
  private readonly countAfterLimit: number;
  private readonly pingDeadlineMs: number;

  private readonly listeners = new Set<() => void>();
  private notifyScheduled = false;
  private subscription: AllStreamSubscription | undefined;
  private resubscribeTimer: NodeJS.Timeout | undefined;
  private resubscribeDelayMs = 500;
  private closed = false;
  /** stretches of $all holding system events only (esdb-read-all.ts) */
  private readonly systemRuns = new SystemRuns();

  constructor(options: EsdbEventStoreOptions) {
    if (options.client) {
      this.client = options.client;
      this.ownsClient = options.ownsClient ?? false;
    } else {
      if (!options.connectionString) throw new Error('EsdbEventStore needs a connectionString or a client');
      this.client = EventStoreDBClient.connectionString(options.connectionString);
      this.ownsClient = options.ownsClient ?? true;
    }
    this.watchOthers = options.watchOthers ?? true;
    this.countAfterLimit = options.countAfterLimit ?? 100_000;
    this.pingDeadlineMs = options.pingDeadlineMs ?? 5_000;
  }

  static fromConnectionString(connectionString: string, options: Omit<EsdbEventStoreOptions, 'connectionString' | 'client'> = {}): EsdbEventStore {
    return new EsdbEventStore({ ...options, connectionString });
  }

  // -- append ---------------------------------------------------------------------------------------------------

  async append(streamId: string, events: EventToAppend[], expected: ExpectedRevision): Promise<AppendResult> {
    if (events.length === 0) throw new Error('append needs at least one event');
    this.assertOpen();
    const esdbExpected = toEsdbExpected(expected);
    const ids = events.map((e) => esdbEventId(e.metadata.eventId));

    const notBefore = earliestStoreTime(events);
    const stored = await this.findStored(streamId, ids, expected, notBefore);
    if (stored) return stored;

    const payload = events.map((e, i) =>
      jsonEvent({
        id: ids[i],
        type: e.type,
        data: (e.data === undefined ? null : e.data) as JSONType,
        metadata: e.metadata as unknown as JSONType,
      }),
    );
    try {
      const res = await this.client.appendToStream(streamId, payload, { expectedRevision: esdbExpected });
      assertAppended(streamId, res); // `throwOnAppendFailure=false` answers a refusal as success: false
      this.notify();
      const position = res.position
        ? encodeEsdbPosition(res.position)
        : await this.positionOfRevision(streamId, res.nextExpectedRevision);
      return { nextRevision: res.nextExpectedRevision, position, alreadyAppended: false };
    } catch (err) {
      if (!isWrongExpectedVersion(err) && !(err instanceof AppendRefusedError)) throw err;
      // A retry whose events are stored already (its original got through, possibly at another revision).
      const again = (await this.findStored(streamId, ids, expected, notBefore)) ?? (await this.findStoredAtTail(streamId, ids, notBefore));
      if (again) return again;
      const actual = err instanceof AppendRefusedError ? await this.currentRevision(streamId) : portActualRevision(err.actualVersion);
      throw new WrongExpectedRevisionError(streamId, expected, actual);
    }
  }

  /** The stream's last revision, `no_stream` when it has none. */
  private async currentRevision(streamId: string): Promise<bigint | 'no_stream'> {
    const [last] = await this.collectStream(streamId, { fromRevision: END, direction: BACKWARDS, maxCount: 1 });
    return last?.event ? last.event.revision : 'no_stream';
  }

  /** Sequential appends (see the header): not atomic on EventStoreDB. */
  async appendMany(appends: StreamAppend[]): Promise<AppendResult[]> {
    checkStreamAppends(appends);
    const results: AppendResult[] = [];
    for (const a of appends) results.push(await this.append(a.streamId, a.events, a.expected));
    return results;
  }

  /** The stored events where this batch would have gone, if they are exactly this batch (by id). */
  private async findStored(streamId: string, ids: string[], expected: ExpectedRevision, notBefore?: number): Promise<AppendResult | undefined> {
    if (expected === 'any' || expected === 'exists') return this.findStoredAtTail(streamId, ids, notBefore);
    const from = expected === 'no_stream' ? 0n : expected + 1n;
    const found = await this.collectStream(streamId, { fromRevision: from === 0n ? ESDB_START : from, direction: FORWARDS, maxCount: ids.length });
    return this.matchBatch(found, ids);
  }

  /**
   * The batch among the stream's latest events. Not only the very last ones (review 17): a first try that was stored,
   * its answer lost (UnavailableError, tried again since f0b88f5), may have been followed by other appends to the
   * stream (an `any` stream is shared: a conversation's messages), and ESDB's own idempotency at `any` is an
   * in-memory cache of event ids, lost with the leader a failover replaces. So the search goes back, page by page,
   * through the events the server stored since `notBefore` (the batch's own time less a clock skew), at most
   * RETRY_LOOKBACK_MAX of them; a stream quiet since then costs the one read it cost before.
   */
  private async findStoredAtTail(streamId: string, ids: string[], notBefore?: number): Promise<AppendResult | undefined> {
    const newestFirst = await this.collectStream(streamId, { fromRevision: END, direction: BACKWARDS, maxCount: ids.length });
    const exact = await this.matchBatch([...newestFirst].reverse(), ids);
    if (exact || notBefore === undefined || newestFirst.length < ids.length) return exact;
    const last = ids[ids.length - 1];
    for (;;) {
      const at = newestFirst.findIndex((r) => r.event?.id.toLowerCase() === last);
      const oldest = newestFirst[newestFirst.length - 1]?.event;
      const complete = at >= 0 && at + ids.length <= newestFirst.length;
      if (complete || !oldest || oldest.revision === 0n) return at >= 0 ? this.matchBatch(newestFirst.slice(at, at + ids.length).reverse(), ids) : undefined;
      // found with older members of its batch still unread: they were stored with it, read on
      if (at < 0 && (storedBefore(oldest, notBefore) || newestFirst.length >= RETRY_LOOKBACK_MAX)) return undefined;
      const page = await this.collectStream(streamId, { fromRevision: oldest.revision - 1n, direction: BACKWARDS, maxCount: RETRY_LOOKBACK_PAGE });
      if (page.length === 0) return undefined;
      newestFirst.push(...page);
    }
  }

  private async matchBatch(found: EsdbResolved[], ids: string[]): Promise<AppendResult | undefined> {
    if (found.length !== ids.length) return undefined;
    for (let i = 0; i < ids.length; i++) {
      if (found[i].event?.id.toLowerCase() !== ids[i]) return undefined;
    }
    const last = found[found.length - 1];
    const pos = positionOf(last);
    return { nextRevision: last.event!.revision, position: pos ? encodeEsdbPosition(pos) : await this.headPosition(), alreadyAppended: true };
  }

  /** Fallback for servers whose append answer carries no position: the position of the event at `revision`. */
  private async positionOfRevision(streamId: string, revision: bigint): Promise<Position> {
    const found = await this.collectStream(streamId, { fromRevision: revision, direction: FORWARDS, maxCount: 1 });
    const pos = found[0] ? positionOf(found[0]) : undefined;
    return pos ? encodeEsdbPosition(pos) : this.headPosition();
  }

  private async collectStream(
    streamId: string,
    options: { fromRevision: ReadRevision; direction: typeof FORWARDS | typeof BACKWARDS; maxCount: number },
  ): Promise<EsdbResolved[]> {
    const out: EsdbResolved[] = [];
    try {
      for await (const resolved of this.client.readStream(streamId, options)) out.push(resolved as EsdbResolved);
    } catch (err) {
      if (isStreamNotFound(err)) return [];
      throw err;
    }
    return out;
  }

  // -- reads ----------------------------------------------------------------------------------------------------

  async readStream(streamId: string, fromRevision = 0n): Promise<RecordedEvent[]> {
    this.assertOpen();
    if (fromRevision < 0n) throw new RangeError(`invalid fromRevision ${fromRevision}`);
    const resolved = await this.collectStream(streamId, {
      fromRevision: fromRevision === 0n ? ESDB_START : fromRevision,
      direction: FORWARDS,
      maxCount: Number.MAX_SAFE_INTEGER,
    });
    const out: RecordedEvent[] = [];
    for (const r of resolved) {
      if (!r.event) continue;
      const pos = positionOf(r);
      out.push(toRecorded(r.event, pos ? encodeEsdbPosition(pos) : START));
    }
    return out;
  }

  async readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>> {
    this.assertOpen();
    const unique = [...new Set(streamIds)];
    const out = new Map<string, RecordedEvent[]>();
    // the client multiplexes reads over one connection; a bounded number in flight keeps memory in check
    for (let i = 0; i < unique.length; i += READ_STREAMS_CONCURRENCY) {
      const slice = unique.slice(i, i + READ_STREAMS_CONCURRENCY);
      const read = await Promise.all(slice.map((id) => this.readStream(id)));
      slice.forEach((id, k) => out.set(id, read[k]));
    }
    return out;
  }

  async readAll(after: Position, limit: number): Promise<ReadAllBatch> {
    this.assertOpen();
    return readAllPages(
      (from, maxCount) => this.client.readAll({ fromPosition: from ?? ESDB_START, direction: FORWARDS, maxCount }) as AsyncIterable<EsdbResolved>,
      after,
      limit,
      (e, position) => toRecorded(e, position),
      this.systemRuns,
    );
  }

  async headPosition(): Promise<Position> {
    this.assertOpen();
    let from: ReadPosition = END;
    let pageSize = 1; // the newest event is usually ours; page wider only when system events trail
    for (;;) {
      let received = 0;
      let oldest: EsdbPosition | undefined;
      let found: EsdbPosition | undefined;
      for await (const item of this.client.readAll({ fromPosition: from, direction: BACKWARDS, maxCount: pageSize })) {
        received++;
        const e = (item as EsdbResolved).event;
        if (!e?.position || found) continue;
        if (from !== END && cmpEsdb(e.position, from as EsdbPosition) >= 0) continue;
        oldest = e.position;
        if (!isSystemEvent(e)) found = e.position;
      }
      if (found) return encodeEsdbPosition(found);
      if (received < pageSize || !oldest) return START;
      from = oldest;
      pageSize = HEAD_PAGE;
    }
  }

  /**
   * Counts non-system events after `after` by reading them forwards (ESDB has no count): O(lag) events over the
   * wire, so it stops at `countAfterLimit` and returns that number ("at least"). Meant for lag display only.
   */
  async countAfter(after: Position): Promise<number> {
    this.assertOpen();
    let cursor = decodeEsdbPosition(after);
    let count = 0;
    while (count < this.countAfterLimit) {
      let received = 0;
      let advanced = false;
      for await (const item of this.client.readAll({ fromPosition: cursor ?? ESDB_START, direction: FORWARDS, maxCount: COUNT_PAGE })) {
        received++;
        const e = (item as EsdbResolved).event;
        if (!e?.position) continue;
        if (cursor && cmpEsdb(e.position, cursor) <= 0) continue;
        cursor = e.position;
        advanced = true;
        if (!isSystemEvent(e)) count++;
      }
      if (received < COUNT_PAGE || !advanced) break;
    }
    return Math.min(count, this.countAfterLimit);
  }

  comparePositions(a: Position, b: Position): number {
    return compareEsdbPositions(a, b);
  }

  // -- notifications --------------------------------------------------------------------------------------------

  onAppended(listener: () => void): () => void {
    this.listeners.add(listener);
    this.ensureWatching();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) void this.stopWatching();
    };
  }

  /** Coalesces bursts (an append plus its echo from the subscription) into one call per listener. */
  private notify(): void {
    if (this.notifyScheduled || this.listeners.size === 0) return;
    this.notifyScheduled = true;
    setImmediate(() => {
      this.notifyScheduled = false;
      if (this.closed) return;
      for (const listener of [...this.listeners]) {
        try {
          listener();
        } catch {
          // a listener's failure is its own business; the others still run
        }
      }
    });
  }

  private ensureWatching(): void {
    if (!this.watchOthers || this.closed || this.subscription || this.resubscribeTimer || this.listeners.size === 0) return;
    let sub: AllStreamSubscription;
    try {
      sub = this.client.subscribeToAll({ fromPosition: END, filter: excludeSystemEvents() });
    } catch {
      this.scheduleResubscribe();
      return;
    }
    this.subscription = sub;
    sub.on('confirmation', () => {
      this.resubscribeDelayMs = 500;
    });
    sub.on('data', () => {
      if (this.subscription === sub) this.notify();
    });
    const dropped = () => {
      if (this.subscription !== sub) return;
      this.subscription = undefined;
      this.notify(); // something may have been appended while we were not listening
      this.scheduleResubscribe();
    };
    sub.on('error', dropped);
    sub.on('end', dropped);
    sub.on('close', dropped);
  }

  private scheduleResubscribe(): void {
    if (this.closed || this.resubscribeTimer || this.listeners.size === 0) return;
    const delay = this.resubscribeDelayMs;
    this.resubscribeDelayMs = Math.min(delay * 2, 30_000);
    this.resubscribeTimer = setTimeout(() => {
      this.resubscribeTimer = undefined;
      this.ensureWatching();
    }, delay);
    this.resubscribeTimer.unref();
  }

  private stopWatching(): Promise<void> {
    if (this.resubscribeTimer) {
      clearTimeout(this.resubscribeTimer);
      this.resubscribeTimer = undefined;
    }
    const sub = this.subscription;
    this.subscription = undefined;
    return sub ? sub.unsubscribe().catch(() => undefined) : Promise.resolve();
  }

  // -- lifecycle ------------------------------------------------------------------------------------------------

  async ping(): Promise<void> {
    this.assertOpen();
    for await (const _ of this.client.readAll({ fromPosition: END, direction: BACKWARDS, maxCount: 1, deadline: this.pingDeadlineMs })) {
      // reaching the server is enough
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    await this.stopWatching();
    if (this.ownsClient) await this.client.dispose();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('EsdbEventStore is closed');
  }
}
