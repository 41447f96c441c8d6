/** Errors that mean "the database is momentarily unreachable", worth retrying (not a bug, not bad config). */
export function isTransientDatabaseError(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  const code = e?.code ?? '';
  if (/^(08|57P)/.test(code) || ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', '53300'].includes(code)) return true;
  return /Connection terminated|terminating connection|not queryable|timeout exceeded when trying to connect/i.test(e?.message ?? '');
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
