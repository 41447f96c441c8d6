import { EventEmitter } from 'node:events';
import type { Pool } from 'pg';
import {
  type AppendResult,
  checkStreamAppends,
  DuplicateEventIdError,
  type EventStore,
  type EventToAppend,
  type ExpectedRevision,
  InvalidPositionError,
  type Position,
  type ReadAllBatch,
  type RecordedEvent,
  START,
  type StreamAppend,
  WrongExpectedRevisionError,
} from '../../ports/event-store';
import { CreationGroupCommit } from './creation-group-commit';
import { knownEventSize } from '../../shared/event-sizes';

/** Position = `${txId}:${seq}`; START = '' sorts before everything. */
const encode = (txId: string, seq: string): Position => `${txId}:${seq}` as Position;

/** `txId:seq`, both as Postgres prints a bigint (no sign, no leading zeros) */
const POSITION = /^(0|[1-9]\d*):(0|[1-9]\d*)$/;
const POSITION_FORM = '"<transaction id>:<sequence>", two integers such as "7042:315"';
const BIGINT_MAX = 9_223_372_036_854_775_807n;

const invalidPosition = (p: string) => new InvalidPositionError(p, POSITION_FORM);

/** Two non-negative integers written in decimal without leading zeros (as Postgres prints bigints). */
const compareDecimals = (a: string, b: string): number =>
  a.length !== b.length ? (a.length < b.length ? -1 : 1) : a === b ? 0 : a < b ? -1 : 1;

function decode(p: Position): [bigint, bigint] {
  if (p === START) return [-1n, -1n];
  const m = POSITION.exec(p);
  if (!m) throw invalidPosition(p);
  const [tx, seq] = [BigInt(m[1]), BigInt(m[2])];
  if (tx > BIGINT_MAX || seq > BIGINT_MAX) throw invalidPosition(p);
  return [tx, seq];
}

interface EventRow {
  seq: string;
  tx_id: string;
  stream_id: string;
  stream_revision: string;
  type: string;
  data: unknown;
  metadata: RecordedEvent['metadata'];
}

/** A row whose data is its JSON text: the event, its size known (knownEventSize: the log's readers size their reads). */
const fromTextRow = (r: EventRow): RecordedEvent => {
  const text = r.data as string;
  const e = toRecorded(r);
  e.data = JSON.parse(text);
  return knownEventSize(e, text.length);
};

const toRecorded = (r: EventRow): RecordedEvent => ({
  type: r.type,
  data: r.data,
  metadata: r.metadata,
  streamId: r.stream_id,
  revision: BigInt(r.stream_revision),
  position: encode(r.tx_id, r.seq),
});

// One statement, one round trip: the CTE reads the stream's revision, checks the expectation, inserts.
// A concurrent writer at the same revision collides on the (stream_id, stream_revision) primary key.
const APPEND_SQL = `
WITH cur AS (
  SELECT COALESCE(MAX(stream_revision), -1) AS rev FROM es.events WHERE stream_id = $1
), ok AS (
  SELECT rev FROM cur
   WHERE CASE $2::text
           WHEN 'any' THEN true
           WHEN 'no_stream' THEN rev = -1
           WHEN 'exists' THEN rev >= 0
           ELSE rev = $3::bigint
         END
)
INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
SELECT $1, ok.rev + e.ord, e.event_id, e.type, e.data, e.metadata
  FROM ok, ROWS FROM (unnest($4::uuid[]), unnest($5::text[]), jsonb_array_elements($6::jsonb), jsonb_array_elements($7::jsonb))
       WITH ORDINALITY AS e(event_id, type, data, metadata, ord)
 ORDER BY e.ord
RETURNING tx_id, seq, stream_revision`;

// appendMany in one statement: every stream's revision is read and checked; the INSERT runs only when all
// expectations hold (all or nothing). Streams: $1 ids, $2 expectation kinds, $3 exact revisions; events,
// flattened in append order: $4 index of their stream in $1 (1-based), $5..$8 id, type, data, metadata (data and
// metadata as one JSON array each: node-postgres would escape every element of a jsonb[] in JavaScript).
const APPEND_MANY_SQL = `
WITH s AS (
  SELECT s.stream_id, s.kind, s.rev AS expected_rev, s.idx
    FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS s(stream_id, kind, rev, idx)
), ok AS (
  SELECT s.idx, s.stream_id, cur.rev
    FROM s CROSS JOIN LATERAL (
      SELECT COALESCE(MAX(e.stream_revision), -1) AS rev FROM es.events e WHERE e.stream_id = s.stream_id
    ) cur
   WHERE CASE s.kind
           WHEN 'any' THEN true
           WHEN 'no_stream' THEN cur.rev = -1
           WHEN 'exists' THEN cur.rev >= 0
           ELSE cur.rev = s.expected_rev
         END
), all_ok AS (
  SELECT 1 AS yes WHERE (SELECT count(*) FROM ok) = cardinality($1::text[])
), ev AS (
  SELECT e.sidx, e.event_id, e.type, e.data, e.metadata, e.ord,
         row_number() OVER (PARTITION BY e.sidx ORDER BY e.ord) AS n
    FROM ROWS FROM (unnest($4::int[]), unnest($5::uuid[]), unnest($6::text[]), jsonb_array_elements($7::jsonb), jsonb_array_elements($8::jsonb))
         WITH ORDINALITY AS e(sidx, event_id, type, data, metadata, ord)
)
INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
SELECT ok.stream_id, ok.rev + ev.n, ev.event_id, ev.type, ev.data, ev.metadata
  FROM all_ok, ok JOIN ev ON ev.sidx = ok.idx
 ORDER BY ev.ord
RETURNING tx_id, seq, stream_id, stream_revision`;

// The hottest statements are named prepared statements (node-postgres prepares them once per connection and
// then only binds and executes: Postgres skips the parse and, once it settles on a generic plan, the planning).
// A name must always go with the same text: these are constants.
const READ_STREAM_SQL = `SELECT seq, tx_id, stream_id, stream_revision, type, data, metadata FROM es.events
  WHERE stream_id = $1 AND stream_revision >= $2 ORDER BY stream_revision`;
const READ_STREAMS_SQL = `SELECT seq, tx_id, stream_id, stream_revision, type, data, metadata FROM es.events
  WHERE stream_id = ANY($1::text[]) ORDER BY stream_id, stream_revision`;
// The log is read below a horizon: no transaction that could still append an event with a lower tx_id is running.
// Both reads also answer the cluster's oldest running transaction id (`cluster_xmin`, one row with no event when
// nothing is readable), which tells when that horizon stays put (docs/core.md, "Reading the log").
// OFFSET 0 keeps the horizon a subquery of its own, computed once: pulled up, `cluster_xmin` was computed again for
// every event returned (a snapshot copied per row: a read of 1,000 events took about 1.5 times as long in Postgres).
// The data comes as its JSON text (as a jsonb column does, parsed here instead of by pg): its length is the event's
// size, which sizes the next read of the log's readers (knownEventSize; regression review 22).
const readAllSql = (horizon: string) => `SELECT h.cluster_xmin, e.seq, e.tx_id, e.stream_id, e.stream_revision, e.type, e.data::text AS data, e.metadata
  FROM (${horizon} OFFSET 0) h
  LEFT JOIN LATERAL (
    SELECT seq, tx_id, stream_id, stream_revision, type, data, metadata FROM es.events
     WHERE (tx_id, seq) > ($1::bigint, $2::bigint) AND tx_id < h.horizon
     ORDER BY tx_id, seq LIMIT $3
  ) e ON true`;
/** Below the oldest running transaction of the whole cluster: one function call, but any database's can hold it. */
const READ_ALL_SQL = readAllSql(
  'SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon, pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS cluster_xmin',
);
/**
 * Below the oldest running transaction that may be this database's: the snapshot's running ids less those that
 * pg_stat_activity shows in another database (a transaction's id never moves between databases; an id it does not
 * show, finished meanwhile or a prepared transaction, counts as this database's). Reads a status entry per backend.
 */
const READ_ALL_OWN_DATABASE_SQL = readAllSql(`
  SELECT LEAST(pg_snapshot_xmax(s)::text::bigint, (
           SELECT min(x::text::bigint) FROM pg_snapshot_xip(s) AS x
            WHERE x::text::bigint % 4294967296 NOT IN (
              SELECT a.backend_xid::text::bigint FROM pg_stat_get_activity(NULL) AS a
               WHERE a.backend_xid IS NOT NULL
                 AND a.datid IS DISTINCT FROM (SELECT oid FROM pg_database WHERE datname = current_database()))
         )) AS horizon,
         pg_snapshot_xmin(s)::text::bigint AS cluster_xmin
    FROM pg_current_snapshot() AS s`);

/**
 * How long the cluster's oldest running transaction must stay the same before the log is read below this database's
 * own instead (READ_ALL_OWN_DATABASE_SQL): under load it moves every few milliseconds, and the cheaper read serves.
 */
export const PINNED_HORIZON_MS = 250;

const MAX_ANY_RETRIES = 20;

/**
 * A log whose newest position is at or past this server's next transaction id (`pg_snapshot_xmax`, which assigns
 * none): positions are the writing server's transaction ids, so a log restored with `pg_dump` into a server whose
 * counter is behind (a new one) reads as not yet committed, and every event appended there would be ordered before
 * it and never read by the projections past their checkpoints (review 19, docs/event-log.md). Never true on the
 * server that wrote the log: its committed ids are all below its next one. Undefined when the log is not ahead.
 */
export async function eventLogAheadOfServer(pool: Pick<Pool, 'query'>): Promise<{ newestTxId: string; nextTxId: string } | undefined> {
  const { rows } = await pool.query<{ newest: string | null; next: string }>(
    `SELECT (SELECT max(tx_id) FROM es.events)::text AS newest, pg_snapshot_xmax(pg_current_snapshot())::text AS next`,
  );
  const { newest, next } = rows[0];
  return newest !== null && BigInt(newest) >= BigInt(next) ? { newestTxId: newest, nextTxId: next } : undefined;
}

const expectationKind = (expected: ExpectedRevision): string => (typeof expected === 'bigint' ? 'revision' : expected);

function expectationHolds(expected: ExpectedRevision, current: bigint | 'no_stream'): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return current === 'no_stream';
  if (expected === 'exists') return current !== 'no_stream';
  return current === expected;
}

export class PostgresEventStore implements EventStore {
  readonly kind = 'postgres' as const;
  readonly appendManyIsAtomic = true;
  private readonly emitter = new EventEmitter();

  /** creations (appends at `no_stream`) arriving together share one statement */
  readonly creations = new CreationGroupCommit({
    appendOne: (a) => this.appendOne(a.streamId, a.events, a.expected),
    appendMany: (appends) => this.appendMany(appends),
  });

  /** the cluster's oldest running transaction id at the last read, and since when it has been that one */
  private clusterXmin = { value: '', since: 0 };

  constructor(
    private readonly pool: Pool,
    private readonly options: { pinnedHorizonMs?: number } = {},
  ) {
    this.emitter.setMaxListeners(0);
  }

  async append(streamId: string, events: EventToAppend[], expected: ExpectedRevision): Promise<AppendResult> {
    if (events.length === 0) throw new Error('append needs at least one event');
    if (expected === 'no_stream') return this.creations.append({ streamId, events, expected });
    return this.appendOne(streamId, events, expected);
  }

  private async appendOne(streamId: string, events: EventToAppend[], expected: ExpectedRevision): Promise<AppendResult> {
    const ids = events.map((e) => e.metadata.eventId);
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await this.pool.query<{ tx_id: string; seq: string; stream_revision: string }>({
          name: 'es_append',
          text: APPEND_SQL,
          values: [
            streamId,
            expectationKind(expected),
            typeof expected === 'bigint' ? expected.toString() : null,
            ids,
            events.map((e) => e.type),
            JSON.stringify(events.map((e) => e.data)),
            JSON.stringify(events.map((e) => e.metadata)),
          ],
        });
        if (res.rowCount === 0) {
          const stored = await this.alreadyStored(streamId, ids);
          if (stored) return stored;
          throw new WrongExpectedRevisionError(streamId, expected, await this.currentRevision(streamId));
        }
        const last = res.rows[res.rows.length - 1];
        this.emitter.emit('appended');
        return { nextRevision: BigInt(last.stream_revision), position: encode(last.tx_id, last.seq), alreadyAppended: false };
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        const stored = await this.alreadyStored(streamId, ids);
        if (stored) return stored;
        // a concurrent writer took the revision first: an `any` or `exists` append still holds, and goes again
        const current = await this.currentRevision(streamId);
        if (!isEventIdTaken(err) && expectationHolds(expected, current) && attempt < MAX_ANY_RETRIES) continue;
        throw new WrongExpectedRevisionError(streamId, expected, current);
      }
    }
  }

  async appendMany(appends: StreamAppend[]): Promise<AppendResult[]> {
    checkStreamAppends(appends);
    const results: AppendResult[] = new Array(appends.length);
    // entries still to append, by their index in `appends`; entries recognised as stored leave this list
    let pending = appends.map((_, i) => i);
    for (let attempt = 0; pending.length > 0; attempt++) {
      const batch = pending.map((i) => appends[i]);
      try {
        const rows = await this.insertMany(batch);
        if (rows.length > 0) {
          const last = new Map<string, { tx_id: string; seq: string; stream_revision: string }>();
          for (const r of rows) {
            const prev = last.get(r.stream_id);
            if (!prev || BigInt(r.stream_revision) > BigInt(prev.stream_revision)) last.set(r.stream_id, r);
          }
          for (const i of pending) {
            const r = last.get(appends[i].streamId)!;
            results[i] = { nextRevision: BigInt(r.stream_revision), position: encode(r.tx_id, r.seq), alreadyAppended: false };
          }
          this.emitter.emit('appended');
          return results;
        }
        // no row: an expectation failed (the INSERT ran for none)
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        // an event id stored already, or a concurrent writer took a revision first: nothing was appended
      }
      const stored = await this.storedEntries(batch);
      if (stored.size > 0) {
        for (const [k, result] of stored) results[pending[k]] = result;
        pending = pending.filter((_, k) => !stored.has(k));
        continue;
      }
      const current = await this.currentRevisions(batch.map((a) => a.streamId));
      const failing = batch.find((a) => !expectationHolds(a.expected, current.get(a.streamId) ?? 'no_stream'));
      if (failing) throw new WrongExpectedRevisionError(failing.streamId, failing.expected, current.get(failing.streamId) ?? 'no_stream');
      // every expectation holds now: a concurrent writer got in between (an `any` or `exists` entry); again
      if (attempt >= MAX_ANY_RETRIES) {
        const a = batch[0];
        throw new WrongExpectedRevisionError(a.streamId, a.expected, current.get(a.streamId) ?? 'no_stream');
      }
    }
    return results;
  }

  private async insertMany(batch: StreamAppend[]) {
    const streamIdx: number[] = [];
    const ids: string[] = [];
    const types: string[] = [];
    const data: unknown[] = [];
    const metadata: unknown[] = [];
    batch.forEach((a, i) => {
      for (const e of a.events) {
        streamIdx.push(i + 1);
        ids.push(e.metadata.eventId);
        types.push(e.type);
        data.push(e.data);
        metadata.push(e.metadata);
      }
    });
    const res = await this.pool.query<{ tx_id: string; seq: string; stream_id: string; stream_revision: string }>({
      name: 'es_append_many',
      text: APPEND_MANY_SQL,
      values: [
        batch.map((a) => a.streamId),
        batch.map((a) => expectationKind(a.expected)),
        batch.map((a) => (typeof a.expected === 'bigint' ? a.expected.toString() : null)),
        streamIdx,
        ids,
        types,
        JSON.stringify(data),
        JSON.stringify(metadata),
      ],
    });
    return res.rows;
  }

  /**
   * Entries of `batch` whose event ids are all stored, in that stream, already (by index in `batch`). Throws
   * DuplicateEventIdError for an entry only part of whose ids are stored, or stored in another stream.
   */
  private async storedEntries(batch: StreamAppend[]): Promise<Map<number, AppendResult>> {
    const ids = batch.flatMap((a) => a.events.map((e) => e.metadata.eventId));
    const res = await this.pool.query<{ event_id: string; tx_id: string; seq: string; stream_revision: string; stream_id: string }>(
      'SELECT event_id::text, tx_id, seq, stream_revision, stream_id FROM es.events WHERE event_id = ANY($1::uuid[])',
      [ids],
    );
    const byId = new Map(res.rows.map((r) => [r.event_id.toLowerCase(), r]));
    const out = new Map<number, AppendResult>();
    batch.forEach((a, k) => {
      const found = a.events.map((e) => byId.get(e.metadata.eventId.toLowerCase()));
      const present = found.filter((r) => r !== undefined);
      if (present.length === 0) return;
      if (present.length !== found.length || present.some((r) => r.stream_id !== a.streamId)) {
        throw new DuplicateEventIdError(a.streamId, a.events.filter((_, i) => found[i] !== undefined).map((e) => e.metadata.eventId));
      }
      const last = present.reduce((x, y) => (BigInt(y.tx_id) > BigInt(x.tx_id) || (y.tx_id === x.tx_id && BigInt(y.seq) > BigInt(x.seq)) ? y : x));
      out.set(k, { nextRevision: BigInt(last.stream_revision), position: encode(last.tx_id, last.seq), alreadyAppended: true });
    });
    return out;
  }

  private async currentRevisions(streamIds: string[]): Promise<Map<string, bigint>> {
    const res = await this.pool.query<{ stream_id: string; rev: string }>(
      'SELECT stream_id, MAX(stream_revision) AS rev FROM es.events WHERE stream_id = ANY($1::text[]) GROUP BY stream_id',
      [streamIds],
    );
    return new Map(res.rows.map((r) => [r.stream_id, BigInt(r.rev)]));
  }

  /** A retried append whose event ids are all stored already is recognised, not duplicated. */
  private async alreadyStored(streamId: string, ids: string[]): Promise<AppendResult | undefined> {
    const res = await this.pool.query<{ tx_id: string; seq: string; stream_revision: string; stream_id: string }>(
      `SELECT tx_id, seq, stream_revision, stream_id FROM es.events WHERE event_id = ANY($1::uuid[])
        ORDER BY tx_id, seq`,
      [ids],
    );
    if (res.rowCount !== ids.length || res.rows.some((r) => r.stream_id !== streamId)) return undefined;
    const last = res.rows[res.rows.length - 1];
    return { nextRevision: BigInt(last.stream_revision), position: encode(last.tx_id, last.seq), alreadyAppended: true };
  }

  private async currentRevision(streamId: string): Promise<bigint | 'no_stream'> {
    const res = await this.pool.query<{ rev: string | null }>(
      'SELECT MAX(stream_revision) AS rev FROM es.events WHERE stream_id = $1',
      [streamId],
    );
    const rev = res.rows[0]?.rev;
    return rev === null || rev === undefined ? 'no_stream' : BigInt(rev);
  }

  async readStream(streamId: string, fromRevision = 0n): Promise<RecordedEvent[]> {
    const res = await this.pool.query<EventRow>({ name: 'es_read_stream', text: READ_STREAM_SQL, values: [streamId, fromRevision.toString()] });
    return res.rows.map(toRecorded);
  }

  async readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>> {
    const out = new Map<string, RecordedEvent[]>(streamIds.map((id) => [id, []]));
    if (streamIds.length === 0) return out;
    const res = await this.pool.query<EventRow>({ name: 'es_read_streams', text: READ_STREAMS_SQL, values: [[...new Set(streamIds)]] });
    for (const row of res.rows) out.get(row.stream_id)!.push(toRecorded(row));
    return out;
  }

  async readAll(after: Position, limit: number): Promise<ReadAllBatch> {
    const [tx, seq] = decode(after);
    const pinned = this.clusterXmin.value !== '' && Date.now() - this.clusterXmin.since >= (this.options.pinnedHorizonMs ?? PINNED_HORIZON_MS);
    const res = await this.pool.query<EventRow & { cluster_xmin: string }>(
      pinned
        ? { name: 'es_read_all_own_database', text: READ_ALL_OWN_DATABASE_SQL, values: [tx.toString(), seq.toString(), limit] }
        : { name: 'es_read_all', text: READ_ALL_SQL, values: [tx.toString(), seq.toString(), limit] },
    );
    const xmin = res.rows[0]?.cluster_xmin;
    if (xmin !== undefined && xmin !== this.clusterXmin.value) this.clusterXmin = { value: xmin, since: Date.now() };
    const events = res.rows.filter((r) => r.tx_id !== null).map(fromTextRow);
    return { events, nextPosition: events.length ? events[events.length - 1].position : after };
  }

  async headPosition(): Promise<Position> {
    // The newest committed event, even if readAll cannot pass it yet (an older transaction is still open):
    // waiting for this position means waiting until everything committed so far has been read.
    const res = await this.pool.query<{ tx_id: string; seq: string }>(
      'SELECT tx_id, seq FROM es.events ORDER BY tx_id DESC, seq DESC LIMIT 1',
    );
    const r = res.rows[0];
    return r ? encode(r.tx_id, r.seq) : START;
  }

  async countAfter(after: Position): Promise<number> {
    const [tx, seq] = decode(after);
    const res = await this.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM es.events WHERE (tx_id, seq) > ($1::bigint, $2::bigint)',
      [tx.toString(), seq.toString()],
    );
    return Number(res.rows[0].n);
  }

  // Hot (every read-your-writes waiter checks it on every batch): compares the decimal parts as strings, no BigInt.
  comparePositions(a: Position, b: Position): number {
    if (a === b) return 0;
    if (a === START) return -1;
    if (b === START) return 1;
    if (!POSITION.test(a) || !POSITION.test(b)) throw invalidPosition(POSITION.test(a) ? b : a);
    const i = a.indexOf(':');
    const j = b.indexOf(':');
    return compareDecimals(a.slice(0, i), b.slice(0, j)) || compareDecimals(a.slice(i + 1), b.slice(j + 1));
  }

  onAppended(listener: () => void): () => void {
    this.emitter.on('appended', listener);
    return () => this.emitter.off('appended', listener);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1 FROM es.events LIMIT 1');
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === '23505';
}

/** The unique violation is on an event id (stored in another stream, or part of the append only), not a revision. */
function isEventIdTaken(err: unknown): boolean {
  return (err as { constraint?: string }).constraint === 'events_event_id';
}
