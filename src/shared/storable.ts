// What Postgres can store: text without U+0000 or an unpaired UTF-16 surrogate (text and jsonb refuse both), and
// instants from year 1 to year 9999 in UTC (timestamptz reads no year 0, and JavaScript writes a year after 9999
// as "+010000-..."). Input crossing into an event or a query is checked here, so a client's or a producer's record
// is refused as the bad input it is instead of failing a query, an append or a projection.
import type { Turns } from './turns';

const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether a parsed JSON value (or query/params object) holds a string or key Postgres cannot store (U+0000, an
 * unpaired surrogate); iterative, so deep nesting cannot overflow the stack. */
export function hasUnstorableText(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (UNSTORABLE.test(v)) return true;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (v !== null && typeof v === 'object' && !Buffer.isBuffer(v)) {
      for (const [k, item] of Object.entries(v)) {
        if (UNSTORABLE.test(k)) return true;
        stack.push(item);
      }
    }
  }
  return false;
}

/** Levels of objects and arrays a request body may nest (deeper input overflows the stack of JSON.stringify). */
export const MAX_JSON_DEPTH = 64;

/** Whether a parsed JSON value nests objects and arrays deeper than `max` levels; iterative, as above. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object' || Buffer.isBuffer(v)) continue;
    if (depth + 1 > max) return true;
    for (const item of Array.isArray(v) ? v : Object.values(v)) stack.push([item, depth + 1]);
  }
  return false;
}

/**
 * What hasUnstorableText and nestsDeeperThan(value, max) say of a large value (a 10 MB send-bulk body), in one walk
 * in slices that give the event loop a turn between them (src/shared/turns.ts; one value of an array or an object
 * is one step): 'unstorable' when hasUnstorableText(value) (checked first by the body hook, so it wins over the
 * depth), else 'deep' when nestsDeeperThan(value, max), else undefined.
 */
export async function scanInTurns(value: unknown, max: number, turns: Turns): Promise<'unstorable' | 'deep' | undefined> {
  const values: unknown[] = [value];
  const depths: number[] = [0];
  let deep = false;
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (typeof v === 'string') {
      if (UNSTORABLE.test(v)) return 'unstorable';
    } else if (v !== null && typeof v === 'object' && !Buffer.isBuffer(v)) {
      if (depth + 1 > max) deep = true;
      if (Array.isArray(v)) {
        for (const item of v) {
          values.push(item);
          depths.push(depth + 1);
        }
      } else {
        for (const k of Object.keys(v)) {
          if (UNSTORABLE.test(k)) return 'unstorable';
          values.push((v as Record<string, unknown>)[k]);
          depths.push(depth + 1);
        }
      }
    }
    if (turns.due()) await turns.next();
  }
  return deep ? 'deep' : undefined;
}

/** The earliest and the latest instant Postgres reads back from an ISO 8601 string in UTC. */
const MIN_STORABLE_MS = new Date('0001-01-01T00:00:00.000Z').getTime();
const MAX_STORABLE_MS = new Date('9999-12-31T23:59:59.999Z').getTime();

/** Whether an instant lies in year 1 to 9999, UTC (an invalid date does not). */
export function isStorableInstant(at: Date | number): boolean {
  const ms = typeof at === 'number' ? at : at.getTime();
  return ms >= MIN_STORABLE_MS && ms <= MAX_STORABLE_MS;
}
