/**
 * The wait a `Retry-After` header asks for (RFC 9110: delay-seconds or an HTTP-date), from `now`, never negative;
 * undefined when it is not one of those.
 */
export function retryAfterMs(value: string, now: Date): number | undefined {
  const v = value.trim();
  const ms = /^[0-9]+$/.test(v) ? Number(v) * 1000 : /[a-z]/i.test(v) ? Date.parse(v) - now.getTime() : NaN;
  return Number.isNaN(ms) ? undefined : Math.max(0, ms);
}

/**
 * The `Retry-After` (seconds) of a 503 DATABASE_UNAVAILABLE (src/http/errors.ts): Postgres could not be reached, or a
 * read lost its connection. A restart or a failover takes seconds; asking for less would have clients and load
 * balancers repeat into the outage, asking for more would keep them away after it.
 */
export const DATABASE_UNAVAILABLE_RETRY_AFTER_S = 5;
