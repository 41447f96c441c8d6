import { EventEmitter } from 'node:events';
import type { Pool } from 'pg';
import {
  type AppendResult,
  type EventStore,
  type EventToAppend,
  type ExpectedRevision,
  type Position,
  type ReadAllBatch,
  type RecordedEvent,
  START,
  WrongExpectedRevisionError,
} from '../../ports/event-store';

/** Position = `${txId}:${seq}`; START = '' sorts before everything. */
const encode = (txId: string, seq: string): Position => `${txId}:${seq}` as Position;

function decode(p: Position): [bigint, bigint] {
  if (p === START) return [-1n, -1n];
  const m = /^(\d+):(\d+)$/.exec(p);
  if (!m) throw new Error(`invalid position ${JSON.stringify(p)}`);
  return [BigInt(m[1]), BigInt(m[2])];
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
  FROM ok, unnest($4::uuid[], $5::text[], $6::jsonb[], $7::jsonb[]) WITH ORDINALITY
       AS e(event_id, type, data, metadata, ord)
 ORDER BY e.ord
RETURNING tx_id, seq, stream_revision`;

const MAX_ANY_RETRIES = 20;

export class PostgresEventStore implements EventStore {
  readonly kind = 'postgres' as const;
  private readonly emitter = new EventEmitter();

  constructor(private readonly pool: Pool) {
    this.emitter.setMaxListeners(0);
  }

  async append(streamId: string, events: EventToAppend[], expected: ExpectedRevision): Promise<AppendResult> {
    if (events.length === 0) throw new Error('append needs at least one event');
    const ids = events.map((e) => e.metadata.eventId);
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await this.pool.query<{ tx_id: string; seq: string; stream_revision: string }>(APPEND_SQL, [
          streamId,
          typeof expected === 'bigint' ? 'revision' : expected,
          typeof expected === 'bigint' ? expected.toString() : null,
          ids,
          events.map((e) => e.type),
          events.map((e) => JSON.stringify(e.data)),
          events.map((e) => JSON.stringify(e.metadata)),
        ]);
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
        if (expected === 'any' && attempt < MAX_ANY_RETRIES) continue;
        throw new WrongExpectedRevisionError(streamId, expected, await this.currentRevision(streamId));
      }
    }
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
    const res = await this.pool.query<EventRow>(
      `SELECT seq, tx_id, stream_id, stream_revision, type, data, metadata FROM es.events
        WHERE stream_id = $1 AND stream_revision >= $2 ORDER BY stream_revision`,
      [streamId, fromRevision.toString()],
    );
    return res.rows.map(toRecorded);
  }

  async readAll(after: Position, limit: number): Promise<ReadAllBatch> {
    const [tx, seq] = decode(after);
    const res = await this.pool.query<EventRow>(
      `SELECT seq, tx_id, stream_id, stream_revision, type, data, metadata FROM es.events
        WHERE (tx_id, seq) > ($1::bigint, $2::bigint)
          AND tx_id < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
        ORDER BY tx_id, seq LIMIT $3`,
      [tx.toString(), seq.toString(), limit],
    );
    const events = res.rows.map(toRecorded);
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

  comparePositions(a: Position, b: Position): number {
    const [at, as] = decode(a);
    const [bt, bs] = decode(b);
    if (at !== bt) return at < bt ? -1 : 1;
    return as === bs ? 0 : as < bs ? -1 : 1;
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
