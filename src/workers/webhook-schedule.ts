// The retry schedule of a webhook delivery (docs/webhooks.md): the wait after each failed attempt, ~3 days in all.
const S = 1000;
const M = 60 * S;
const H = 60 * M;
export const RETRY_SCHEDULE_MS: readonly number[] = [5 * S, 30 * S, 2 * M, 10 * M, 30 * M, 1 * H, 2 * H, 4 * H, 8 * H, 8 * H, 12 * H, 12 * H, 12 * H, 12 * H];

/** The wait before attempt `failedAttempts + 1`, with ±20 % jitter; undefined when the schedule is exhausted. */
export function nextRetryDelay(schedule: readonly number[], failedAttempts: number, random: () => number = Math.random): number | undefined {
  const base = schedule[failedAttempts - 1];
  return base === undefined ? undefined : Math.round(base * (0.8 + 0.4 * random()));
}

/** An endpoint whose attempts have all failed for this long is disabled. */
export const FAILING_DISABLE_AFTER_MS = 5 * 24 * H;
