/**
 * 55000 object_not_in_prerequisite_state is also a statement's error (`currval` before `nextval`): only the refusal of
 * a database that does not allow connections now (ALTER DATABASE ... ALLOW_CONNECTIONS false, as an operator or a
 * maintenance does) is one (it answered 500 "internal server error", logged as an unhandled error; a CI run saw it).
 */
const isDatabaseNotAcceptingConnections = (code: string, message: string, routine?: unknown): boolean =>
  code === '55000' && (routine === 'CheckMyDatabase' || /is not currently accepting connections/.test(message));
// The text is in the server's lc_messages (Spanish, German...: the refusal was a 500 again, regression review 19); the
// routine that raised it (the ErrorResponse's R field, never translated) is CheckMyDatabase, at connect only.

/** Errors that mean "the database is momentarily unreachable", worth retrying (not a bug, not bad config). */
export function isTransientDatabaseError(err: unknown): boolean {
  const e = err as { code?: string; message?: string; routine?: unknown } | undefined;
  const code = e?.code ?? '';
  if (/^(08|57P)/.test(code) || ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', '53300'].includes(code)) return true;
  if (isDatabaseNotAcceptingConnections(code, e?.message ?? '', e?.routine)) return true;
  return /Connection terminated|terminating connection|not queryable|timeout exceeded when trying to connect/i.test(e?.message ?? '');
}

/**
 * A connection lost under a statement (a terminated backend, a failover: the pool's other idle connections die with
 * it), or refused at once: worth another try soon. Not a pool's connect timeout: it already waited for a connection
 * (10 s), and more tries would hold an answer that much longer while the database is unreachable.
 */
export function isLostConnection(err: unknown): boolean {
  if (isEventStoreConnectionLost(err)) return true;
  // pg-pool's connect timeouts: waiting for a pooled client, and a new connection's (regression review 14: the
  // latter, `Connection terminated due to connection timeout`, was taken for a lost connection and tried twice more)
  return isTransientDatabaseError(err) && (err as { code?: string }).code !== 'ETIMEDOUT'
    && !/timeout exceeded when trying to connect|due to connection timeout/i.test((err as { message?: string }).message ?? '');
}

/**
 * EventStoreDB's client (`@eventstore/db-client`) reports a lost or refused connection as an UnavailableError (type
 * `unavailable`) and a node that is no longer the leader as a NotLeaderError (`not-leader`); it reconnects on the next
 * call. Review 16d found them unknown here: on EventStoreDB the appends tried again on a lost connection (the bulk's
 * commit point) were not. Not its deadline (`deadline-exceeded`): it already waited, as pg-pool's connect timeout.
 */
const EVENT_STORE_LOST_TYPES = new Set(['unavailable', 'not-leader']);
const isEventStoreConnectionLost = (err: unknown): boolean =>
  err instanceof Error && EVENT_STORE_LOST_TYPES.has(String((err as { type?: unknown }).type));

/** Node's errors of a connection that was never made: refused, no route, a name that does not resolve (now or at all). */
const NOT_CONNECTED_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);
/**
 * Postgres's refusals of a new connection: 57P03 cannot_connect_now (starting up, shutting down, in recovery), 53300
 * too_many_connections (the server's or a role's or database's limit), 08001 and 08004 (the connection could not be
 * established, or the server rejected it).
 */
const REFUSED_AT_CONNECT_SQLSTATES = new Set(['57P03', '53300', '08001', '08004']);

/**
 * Postgres could not be reached: the failure came while a connection was being made, so no statement was sent on it
 * (as pg and pg-pool report it, checked against real servers in test/api/review16c-pg-failures.test.ts):
 * `ECONNREFUSED` (nothing listens: a stopped server), `ENOTFOUND`/`EAI_AGAIN` (DNS), `ETIMEDOUT` of the `connect`
 * call, pg-pool's `timeout exceeded when trying to connect` (no pooled client free in time) and pg's `Connection
 * terminated due to connection timeout` (a new connection's), the SQLSTATEs above and a database not accepting
 * connections. Not caught here, because pg reports it with the same text as a connection lost under a statement: a
 * server that accepts and closes at once (`Connection terminated unexpectedly`); isLostConnection has it.
 */
export function isDatabaseUnreachable(err: unknown): boolean {
  const e = err as { code?: unknown; syscall?: unknown; message?: unknown; routine?: unknown } | null | undefined;
  if (e === null || typeof e !== 'object') return false;
  const code = typeof e.code === 'string' ? e.code : '';
  if (NOT_CONNECTED_CODES.has(code) || REFUSED_AT_CONNECT_SQLSTATES.has(code)) return true;
  if (code === 'ETIMEDOUT' && e.syscall === 'connect') return true;
  const message = typeof e.message === 'string' ? e.message : '';
  if (isDatabaseNotAcceptingConnections(code, message, e.routine)) return true;
  return /timeout exceeded when trying to connect|Connection terminated due to connection timeout/i.test(message);
}

/**
 * The database is unavailable to this request: it could not be reached (isDatabaseUnreachable) or the connection was
 * lost under a statement (isLostConnection). What the HTTP layer answers with 503 or, for a command that may have
 * written, 500 (src/http/errors.ts).
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  return isDatabaseUnreachable(err) || isLostConnection(err);
}

/** Pauses before a statement whose connection was lost (isLostConnection) is tried again. */
export const LOST_CONNECTION_RETRY_MS = [50, 250] as const;

/**
 * After `firstError` (a first try made by the caller, so its success path adds nothing), `retry` once after each of
 * LOST_CONNECTION_RETRY_MS while the failure is `worthAnother` (default: a lost connection; `retried`: how many
 * retries failed so far); `onRetry` is told before each (to log it). Throws the last failure.
 */
export async function againOnLostConnection<T>(
  firstError: unknown,
  retry: () => Promise<T>,
  onRetry: (err: unknown, attempt: number) => void,
  worthAnother: (err: unknown, retried: number) => boolean = isLostConnection,
): Promise<T> {
  let err = firstError;
  for (let i = 0; ; i++) {
    if (i >= LOST_CONNECTION_RETRY_MS.length || !worthAnother(err, i)) throw err;
    onRetry(err, i + 1);
    await new Promise((ok) => setTimeout(ok, LOST_CONNECTION_RETRY_MS[i]));
    try {
      return await retry();
    } catch (next) {
      err = next;
    }
  }
}

/** Runs a start-up step, retrying transient database failures with backoff for up to `maxMs`. */
export async function retryTransient<T>(
  step: string,
  fn: () => Promise<T>,
  options: { maxMs?: number; onRetry?: (err: unknown, step: string, attempt: number) => void } = {},
): Promise<T> {
  const deadline = Date.now() + (options.maxMs ?? 60_000);
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!isTransientDatabaseError(err) || Date.now() > deadline) throw err;
      options.onRetry?.(err, step, attempt);
      await new Promise((r) => setTimeout(r, Math.min(5000, 100 * 2 ** Math.min(attempt, 6))));
    }
  }
}
