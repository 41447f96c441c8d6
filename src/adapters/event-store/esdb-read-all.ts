// Reading $all for the EventStoreDB adapter (esdb.ts), without the client: the page loop of `readAll`, given a
// function that reads one page forwards, and what it remembers about stretches of $all holding only system events.
// Review 16d (2026-11-28): see docs/core.md, "EventStoreDB adapter: reviewed by reading".

import type { Position as EsdbPosition } from '@eventstore/db-client';
import { InvalidPositionError, type Position, START } from '../../ports/event-store';

/** The largest value of a uint64: EventStoreDB's "no position" (a stream read on a server that sends none) and `End`. */
export const ESDB_NO_POSITION = 18_446_744_073_709_551_615n;

const POSITION_FORM = '"<commit>/<prepare>", two integers below 18446744073709551615 such as "1048576/1048576"';

/**
 * Parses a port position; START → null. Refuses a part of the uint64 maximum or above: the client writes a larger
 * one to the wire wrapped (`18446744073709551616/1` read from `0/1`: a hand-typed `--from` one digit too long read
 * the log from somewhere else), and the maximum is EventStoreDB's "no position" / End, never an event's.
 */
export function decodeEsdbPosition(p: Position): EsdbPosition | null {
  if (p === START) return null;
  const m = /^(\d+)\/(\d+)$/.exec(p);
  const invalid = () => new InvalidPositionError(p, POSITION_FORM, 'EventStoreDB');
  if (!m) throw invalid();
  const commit = BigInt(m[1]);
  const prepare = BigInt(m[2]);
  if (commit >= ESDB_NO_POSITION || prepare >= ESDB_NO_POSITION) throw invalid();
  return { commit, prepare };
}

export function encodeEsdbPosition(p: EsdbPosition): Position {
  return `${p.commit.toString(10)}/${p.prepare.toString(10)}` as Position;
}

export function cmpEsdb(a: EsdbPosition, b: EsdbPosition): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.prepare !== b.prepare) return a.prepare < b.prepare ? -1 : 1;
  return 0;
}

/**
 * The $all position of an event as a read answered it, or undefined when the answer has none. A stream read on a
 * server before 22.6 (or of an event written in an explicit transaction) answers the uint64 maximum, not nothing:
 * taken as a position it is after every event, and a read-your-writes wait for it never ends.
 */
export function esdbEventPosition(r: { event?: { position?: EsdbPosition }; commitPosition?: bigint }): EsdbPosition | undefined {
  const p = r.event?.position;
  if (p && p.commit < ESDB_NO_POSITION && p.prepare < ESDB_NO_POSITION) return p;
  // v2 log events have commit == prepare
  if (r.commitPosition !== undefined && r.commitPosition < ESDB_NO_POSITION) return { commit: r.commitPosition, prepare: r.commitPosition };
  return undefined;
}

/** The fields of an event of a $all read this module looks at. */
export interface AllEvent {
  streamId: string;
  type: string;
  position?: EsdbPosition;
}

/** An event of EventStoreDB itself: a `$` type or a `$` stream (statistics, settings, projections' links, metadata). */
export const isSystemEvent = (e: Pick<AllEvent, 'streamId' | 'type'>): boolean => e.type.startsWith('$') || e.streamId.startsWith('$');

/**
 * Stretches of $all known to hold system events only: `after` → the last position read past them. $all only grows
 * at its end (a later commit gets a later position), so once read, such a stretch stays without events of ours,
 * and a read from `after` may start at its end. Without it every poll from a checkpoint read the same trailing
 * system events again. Bounded; the oldest entries go first.
 */
export class SystemRuns {
  private readonly runs = new Map<Position, Position>();

  constructor(private readonly max = 1024) {}

  /** Where a read strictly after `after` may start: the end of the known run(s) that follow it. */
  resolve(after: Position): Position {
    let at = after;
    for (let hops = 0; hops < 16; hops++) {
      const next = this.runs.get(at);
      if (next === undefined) break;
      at = next;
    }
    return at;
  }

  record(after: Position, end: Position): void {
    if (end === after) return;
    this.runs.delete(after);
    this.runs.set(after, end);
    while (this.runs.size > this.max) this.runs.delete(this.runs.keys().next().value as Position);
  }

  get size(): number {
    return this.runs.size;
  }
}

/** Reads one page of $all forwards from `from` (null: the start), at most `maxCount` items. */
export type ReadAllPage<T> = (from: EsdbPosition | null, maxCount: number) => AsyncIterable<T>;

/** The largest page read while a page brought no event of ours (a run of system events): fewer round trips. */
export const SCAN_PAGE_MAX = 4096;

/**
 * The port's readAll over EventStoreDB: up to `limit` events of ours strictly after `after`, in $all order.
 * A forward read of $all includes the event at its start, so a page asks one more and drops it. System events are
 * skipped but move `nextPosition` past them. The read goes on until it has an event of ours or reaches the end of
 * $all: an empty batch means "nothing more now", as on Postgres. (Before review 16d it gave up after 50,000 system
 * events with an empty batch, which the webhook fan-out, the export, a rebuild and the lag read as the end of the
 * log: the fan-out stood still for good behind a long run of system events.) While pages bring only system events
 * they grow (doubling, up to SCAN_PAGE_MAX), so a `limit` of 1 does not cross a long run two events at a time.
 */
export async function readAllPages<T extends { event?: AllEvent }, R>(
  readPage: ReadAllPage<T>,
  after: Position,
  limit: number,
  convert: (event: NonNullable<T['event']>, position: Position) => R,
  runs?: SystemRuns,
): Promise<{ events: R[]; nextPosition: Position }> {
  const events: R[] = [];
  decodeEsdbPosition(after); // InvalidPositionError before anything is read
  if (limit <= 0) return { events, nextPosition: after };
  const start = runs ? runs.resolve(after) : after;
  let cursor = decodeEsdbPosition(start);
  let nextPosition = start;
  let scanPage = 0;
  for (;;) {
    const wanted = limit - events.length + 1;
    const pageSize = Math.max(wanted, scanPage);
    let received = 0;
    let advanced = false;
    const before = events.length;
    for await (const item of readPage(cursor, pageSize)) {
      received++;
      const e = item.event;
      if (!e?.position) continue;
      if (cursor && cmpEsdb(e.position, cursor) <= 0) continue;
      if (events.length >= limit) continue; // drain the page; this event is read again next time
      cursor = e.position;
      nextPosition = encodeEsdbPosition(e.position);
      advanced = true;
      if (isSystemEvent(e)) continue;
      events.push(convert(e as NonNullable<T['event']>, nextPosition));
    }
    if (events.length >= limit || received < pageSize || !advanced) break; // full, or the end of $all
    if (events.length === before) scanPage = Math.min(SCAN_PAGE_MAX, Math.max(2 * pageSize, 64));
  }
  if (events.length === 0) runs?.record(after, nextPosition);
  return { events, nextPosition };
}
