/** The part of start-up that failed: the CLI names the cause and the fix from it (src/cli/startup-errors.ts). */
export type StartupStep = 'data-dir' | 'embedded-postgres' | 'database' | 'kafka' | 'http' | 'ops-http';

export class StartupStepError extends Error {
  override name = 'StartupStepError';

  constructor(
    readonly step: StartupStep,
    /** what the step talked to, without secrets: a folder, `host:port/database`, the brokers, `host:port` */
    readonly target: string,
    cause: unknown,
    /** how long the step waited for the other side to answer, when it waited */
    readonly waitedMs?: number,
  ) {
    super(`${step} (${target}): ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** Runs a start-up step; whatever it throws comes out as a StartupStepError naming the step. */
export async function startupStep<T>(step: StartupStep, target: string, fn: () => T | Promise<T>, waitedMs?: number): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new StartupStepError(step, target, err, waitedMs);
  }
}

/** The other side never answered (as opposed to answering with an error). */
export class NoAnswerError extends Error {
  override name = 'NoAnswerError';
}

/**
 * The other side answered that the credentials are refused (EventStoreDB's gRPC UNAUTHENTICATED or PERMISSION_DENIED,
 * which its client turns into an AccessDeniedError of type `access-denied`): waiting longer changes nothing.
 */
export function isAccessRefused(err: unknown): boolean {
  if ((err as { type?: unknown } | null)?.type === 'access-denied') return true;
  return err instanceof Error && /\b(UNAUTHENTICATED|PERMISSION_DENIED)\b|access denied/i.test(err.message);
}

/**
 * Calls `ping` until it resolves; rejects with the last failure once `maxMs` have passed, or at once with a failure
 * `final` says waiting cannot mend (refused credentials).
 */
export async function waitUntilAnswers(ping: () => Promise<unknown>, maxMs: number, pauseMs = 500, final: (err: unknown) => boolean = () => false): Promise<void> {
  const deadline = Date.now() + maxMs;
  let lastError: unknown = new NoAnswerError(`no answer within ${maxMs} ms`);
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) throw lastError;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        ping(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(lastError), remaining);
        }),
      ]);
      return;
    } catch (err) {
      if (final(err)) throw err;
      lastError = err;
    } finally {
      clearTimeout(timer);
    }
    await new Promise((r) => setTimeout(r, Math.min(pauseMs, Math.max(0, deadline - Date.now()))));
  }
}

/** `host:port/database` of a Postgres URL: the password never reaches a message. */
export function postgresTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || 'localhost'}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return 'DATABASE_URL';
  }
}
