// The Idempotency-Key's timing (docs/idempotency.md), shared by the HTTP layer's key records (src/http/idempotency.ts)
// and the keyed send, whose stream is its key's record (src/commands/send/keyed.ts).

/** a key is remembered this long from its first use */
export const KEY_TTL_MS = 24 * 60 * 60 * 1000;
/** a request under a key counts as in flight this long: an HTTP claim's lease (renewed by its process), a keyed send's request */
export const LEASE_MS = 15_000;
/** how long a repeat waits for the first request in flight before answering 409 */
export const IN_FLIGHT_WAIT_MS = 5_000;
/** how often a waiting repeat looks again for an answer recorded by another process */
export const IN_FLIGHT_POLL_MS = 200;
