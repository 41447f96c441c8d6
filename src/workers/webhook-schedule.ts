// The retry schedule of a webhook delivery (docs/webhooks.md): the wait after each failed attempt, ~3 days in all.
import { retryAfterMs } from '../shared/retry-after';

const S = 1000;
const M = 60 * S;
const H = 60 * M;
export const RETRY_SCHEDULE_MS: readonly number[] = [5 * S, 30 * S, 2 * M, 10 * M, 30 * M, 1 * H, 2 * H, 4 * H, 8 * H, 8 * H, 12 * H, 12 * H, 12 * H, 12 * H];

/** The wait before attempt `failedAttempts + 1`, with ±20 % jitter; undefined when the schedule is exhausted. */
export function nextRetryDelay(schedule: readonly number[], failedAttempts: number, random: () => number = Math.random): number | undefined {
  const base = schedule[failedAttempts - 1];
  return base === undefined ? undefined : Math.round(base * (0.8 + 0.4 * random()));
}

/** The longest wait a failed answer's `Retry-After` may ask for: beyond it the schedule's own wait applies. */
export const MAX_RETRY_AFTER_MS = 1 * H;

/** The wait a `Retry-After` header asks for (src/shared/retry-after.ts), at most MAX_RETRY_AFTER_MS. */
export function retryAfterDelay(value: string, now: Date): number | undefined {
  const ms = retryAfterMs(value, now);
  return ms === undefined ? undefined : Math.min(MAX_RETRY_AFTER_MS, ms);
}

/**
 * The wait before the next attempt after a failed one: the schedule's (undefined once exhausted), or longer when the
 * answer's `Retry-After` asked for more (`retryAfterMs`; Standard Webhooks, "Delivery success and failure").
 */
export function retryDelayAfterFailure(schedule: readonly number[], failedAttempts: number, retryAfterMs: number | undefined, random?: () => number): number | undefined {
  const delay = nextRetryDelay(schedule, failedAttempts, random);
  return delay === undefined || retryAfterMs === undefined ? delay : Math.max(delay, retryAfterMs);
}

/** An endpoint whose attempts have all failed for this long is disabled. */
export const FAILING_DISABLE_AFTER_MS = 5 * 24 * H;
