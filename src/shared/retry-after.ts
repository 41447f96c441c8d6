/**
 * The wait a `Retry-After` header asks for (RFC 9110: delay-seconds or an HTTP-date), from `now`, never negative;
 * undefined when it is not one of those.
 */
export function retryAfterMs(value: string, now: Date): number | undefined {
  const v = value.trim();
  const ms = /^[0-9]+$/.test(v) ? Number(v) * 1000 : /[a-z]/i.test(v) ? Date.parse(v) - now.getTime() : NaN;
  return Number.isNaN(ms) ? undefined : Math.max(0, ms);
}
