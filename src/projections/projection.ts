import type { PoolClient } from 'pg';
import type { EventStore, ReadAllBatch, RecordedEvent } from '../ports/event-store';

/**
 * A read model: its tables live in their own Postgres schema (`schema`). `ddl` and `apply` use unqualified
 * table names: the runner sets `search_path` to the schema being written (the live one, or the fresh one a
 * rebuild fills). Query functions use the qualified live names (`schema.table`).
 * Bump `version` when the DDL or apply logic changes: the runner rebuilds it from position zero.
 */
export interface Projection {
  readonly name: string;
  readonly version: number;
  readonly schema: string;
  readonly ddl: string;
  readonly handles: readonly string[];
  /** Must be idempotent: a redelivered event changes nothing. */
  apply(tx: PoolClient, event: RecordedEvent): Promise<void>;
  /**
   * Optional: applies a batch of handled events (global order) with fewer statements, e.g. one multi-row
   * `INSERT … ON CONFLICT` per table. Must leave exactly the rows that `apply` one event at a time leaves.
   */
  applyBatch?(tx: PoolClient, events: readonly RecordedEvent[]): Promise<void>;
  /**
   * Optional: false for an event of a handled type that changes nothing here (e.g. an outbound message for a
   * model of replies). The runner treats it as unhandled: a batch of such events opens no transaction.
   */
  affects?(event: RecordedEvent): boolean;
}

/** What a projection runner and a rebuild read of the log. */
export type LogReader = Pick<EventStore, 'readAll' | 'headPosition' | 'comparePositions'>;

/** A stored event its schema (after upcasting) refuses: `refusal` says why. */
export class UnreadableEventError extends Error {
  constructor(readonly event: RecordedEvent, readonly refusal: Error) {
    super(`event ${event.position} (${event.type}, stream ${event.streamId}) cannot be read: ${refusal.message}`);
  }
}

/** Events of a log read through `upcastingReader` that could not be upcast (their schema refuses them): the error. */
const unreadable = new WeakMap<RecordedEvent, UnreadableEventError>();

/**
 * The log of `store` (the adapter itself) with each event upcast on its own (`upcast`: the event registry's, which
 * also validates): an event that cannot be is returned as stored and marked, rather than failing the whole read, so
 * it stalls only the projections that handle its type (`applyHandled` refuses it); the others read past it. Read
 * through the validating store, such an event failed every projection's reads, whatever types they handle.
 */
export function upcastingReader(store: EventStore, upcast: (event: RecordedEvent) => RecordedEvent): LogReader {
  const read = (e: RecordedEvent): RecordedEvent => {
    try {
      return upcast(e);
    } catch (err) {
      unreadable.set(e, new UnreadableEventError(e, err instanceof Error ? err : new Error(String(err))));
      return e;
    }
  };
  return {
    readAll: async (after, limit) => {
      const batch = await store.readAll(after, limit);
      return { ...batch, events: batch.events.map(read) };
    },
    headPosition: () => store.headPosition(),
    comparePositions: (a, b) => store.comparePositions(a, b),
  };
}

/**
 * `batch` up to the first event that could not be read (`upcastingReader`) and that the reader `reads`, which it must
 * not skip: it goes up to just before it, then fails on it (that event's UnreadableEventError, thrown when it is the
 * first) until it can be read. Unreadable events it does not read pass. The projection runner (a projection's
 * handled types), the webhook fan-out (the types it turns into webhooks) and `events export` (its filters) read the
 * log this way.
 */
export function upToUnreadable(batch: ReadAllBatch, reads: (event: RecordedEvent) => boolean): ReadAllBatch {
  const i = batch.events.findIndex((e) => unreadable.has(e) && reads(e));
  if (i < 0) return batch;
  if (i === 0) throw unreadable.get(batch.events[0])!;
  return { events: batch.events.slice(0, i), nextPosition: batch.events[i - 1].position };
}

/**
 * Whether `p` applies `event` (its type is handled and, when the projection says so, it changes something). An
 * unreadable event of a handled type counts as applied (and is refused by `applyHandled`): its data cannot be asked.
 */
export const appliesTo = (p: Projection, event: RecordedEvent): boolean =>
  p.handles.includes(event.type) && (p.affects === undefined || unreadable.has(event) || p.affects(event));

/**
 * Applies the events `p` handles, in order: through `applyBatch` when it has one, else one `apply` each. Throws,
 * applying nothing, when one of them is unreadable (`upcastingReader`): the projection must not skip it.
 */
export async function applyHandled(p: Projection, tx: PoolClient, events: readonly RecordedEvent[]): Promise<number> {
  const handled = events.filter((e) => appliesTo(p, e));
  if (handled.length === 0) return 0;
  for (const e of handled) {
    const err = unreadable.get(e);
    if (err) throw err;
  }
  if (p.applyBatch) await p.applyBatch(tx, handled);
  else for (const e of handled) await p.apply(tx, e);
  return handled.length;
}

export const rebuildSchemaOf = (p: Projection): string => `${p.schema}__next`;

/**
 * SQL (a scalar subquery) that moves the sequence of serial `table.column` forward to `maxId` (an SQL expression; NULL
 * does nothing) when it is behind, never back. For ids a projection assigns itself (highest id plus rank, in its
 * batch's transaction, so a rolled-back batch burns none): a process of an earlier version beside it still takes
 * its ids from the column's sequence, and must draw above every id assigned here. `setval` is not rolled back:
 * after a failed batch the sequence may be ahead of the table, which costs that process a gap, never a collision.
 */
export const serialPast = (table: string, column: string, maxId: string): string =>
  `(SELECT setval(q.s, q.m) FROM (SELECT pg_get_serial_sequence('${table}', '${column}')::regclass AS s, ${maxId} AS m) q
     WHERE q.m > COALESCE(pg_sequence_last_value(q.s), 0))`;
