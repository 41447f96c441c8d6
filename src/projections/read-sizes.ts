// The size of each read of a long stretch of the log (a rebuild, the projection runner, the webhook fan-out, `events
// export` with its own budget): events may be MBs, so a read asks for as many as fit a byte budget, judged from the largest event of
// the last read (docs/core.md, "Projections": the memory bound; review 20).
import type { RecordedEvent } from '../ports/event-store';
import { knownEventSizeOf } from '../shared/event-sizes';

/**
 * About how many characters of JSON one read of the log may bring, for the readers of long stretches of it (a
 * rebuild, the projection runner, the webhook fan-out): an event may be MBs (a bulk send's BulkRecipientsAdded chunk:
 * up to 256 KiB of recipients, more for a single large recipient; a send-bulk body is up to 32 MiB). The parsed
 * events take a few times their text. Before review 20 these read 1,000 or 2,000 events whatever their size: a log
 * of 1,000 chunks of 256 KiB was one read, and a 192 MB heap ran out.
 */
export const READ_BYTES = 8 * 1024 * 1024;

/**
 * How many events the next read of the log asks for, after one that asked for `size` and whose largest event was
 * estimated at `largest` (eventSizeEstimate): no more than `bytes` (READ_BYTES) of events that large, at most twice the last
 * read (start at 1), at least one, at most `max`. Small events: `max` from the 11th read on. A run of large events
 * after a long run of small ones can still bring one read of up to `max` of them (the store cannot bound a read by
 * bytes: docs/core.md, "Projections").
 */
export const nextReadSize = (size: number, largest: number, max: number, bytes = READ_BYTES): number =>
  Math.max(1, Math.min(max, size * 2, Math.floor(bytes / Math.max(1, largest))));

/**
 * About how many characters of JSON an event's data takes: exactly when its store said (knownEventSize, src/shared/event-sizes.ts), else
 * estimated without serializing it: every key and string counted, an array of more than 3 items by its first, middle
 * and last (times its length), so the work follows the event's shape, not its size (a chunk of 1,000 recipients
 * costs as much as one of 3; one whose large recipient is none of those three is taken for much less than it is).
 * Metadata is small and not counted.
 */
export function eventSizeEstimate(e: RecordedEvent): number {
  return knownEventSizeOf(e) ?? jsonSizeEstimate(e.data);
}

function jsonSizeEstimate(v: unknown): number {
  if (typeof v === 'string') return v.length + 2;
  if (v === null || typeof v !== 'object') return 8;
  if (Array.isArray(v)) {
    const n = v.length;
    if (n > 3) return 2 + Math.ceil((n * (jsonSizeEstimate(v[0]) + jsonSizeEstimate(v[n >> 1]) + jsonSizeEstimate(v[n - 1]) + 3)) / 3);
    let size = 2;
    for (let i = 0; i < n; i++) size += jsonSizeEstimate(v[i]) + 1;
    return size;
  }
  let size = 2;
  for (const k in v) size += k.length + 4 + jsonSizeEstimate((v as Record<string, unknown>)[k]);
  return size;
}

/** The largest eventSizeEstimate of `events` (0 for none). */
export function largestEventEstimate(events: readonly RecordedEvent[]): number {
  let largest = 0;
  for (let i = 0; i < events.length; i++) {
    const size = eventSizeEstimate(events[i]);
    if (size > largest) largest = size;
  }
  return largest;
}
