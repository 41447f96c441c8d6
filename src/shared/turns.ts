// Long loops of a request that give the event loop a turn between slices (docs/bulk.md, "Event loop"): a send-bulk
// of 100,000 recipients checks, normalizes and deduplicates every one, seconds of work in one piece that held every
// other request of the process (reads, /healthz, /readyz, other companies' sends) until it ended. Used by the
// commands (the recipients' loops, the dispatcher's materialization) and by http (the body scan and the
// Idempotency-Key fingerprint of a large body). Moved here from src/commands/bulk/chunked.ts.

/** A slice ends after this many items at most (so a loop of more items always yields, whatever the machine's speed). */
export const TURN_MAX_ITEMS = 2048;
/** ... or sooner, once it has run this long (checked every TURN_CHECK_EVERY items). */
export const TURN_MAX_MS = 10;
const TURN_CHECK_EVERY = 32;

/** Resolves after the event loop has run its pending I/O callbacks and timers (a macrotask turn, not a microtask). */
export const nextTurn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Counts the items of one request's loops and says when the current slice is over. One per request, shared by its
 * loops, so short loops in a row add up to one slice. `due()` is cheap (a counter; the clock every 32 items).
 */
export class Turns {
  private items = 0;
  private started = performance.now();
  /** turns given so far (for tests and measurements) */
  yields = 0;

  /** Counts one item; true when the slice is over (then `await turns.next()`). */
  due(): boolean {
    const n = ++this.items;
    if (n >= TURN_MAX_ITEMS) return true;
    return n % TURN_CHECK_EVERY === 0 && performance.now() - this.started >= TURN_MAX_MS;
  }

  /** Gives the event loop a turn and starts a new slice. */
  async next(): Promise<void> {
    await nextTurn();
    this.yields++;
    this.items = 0;
    this.started = performance.now();
  }
}

/** `fn(0)` … `fn(n - 1)` in order, giving the event loop a turn between slices. */
export async function forEachInTurns(n: number, fn: (i: number) => void, turns: Turns = new Turns()): Promise<void> {
  for (let i = 0; i < n; i++) {
    fn(i);
    if (turns.due()) await turns.next();
  }
}

/** `items.map(fn)` in turns. */
export async function mapInTurns<T, U>(items: readonly T[], fn: (item: T, i: number) => U, turns: Turns = new Turns()): Promise<U[]> {
  const out: U[] = new Array(items.length);
  await forEachInTurns(items.length, (i) => {
    out[i] = fn(items[i], i);
  }, turns);
  return out;
}

/** A request body above this many bytes (Content-Length) is scanned and fingerprinted in turns (docs/bulk.md,
 * "Event loop"); at or below it, in one piece, as before (the common case: no extra await, no extra allocation). */
export const LARGE_BODY_BYTES = 256 * 1024;

/**
 * Whether a request's body is large enough to be walked in turns: a Content-Length above LARGE_BODY_BYTES, or a body
 * sent without Content-Length (chunked: its size is not known up front; rare from clients). A request without a body
 * (undefined after parsing) never is.
 */
export function isLargeBody(headers: { 'content-length'?: string }, body: unknown): boolean {
  if (body === undefined) return false;
  const length = headers['content-length'];
  return length === undefined || Number(length) > LARGE_BODY_BYTES;
}
