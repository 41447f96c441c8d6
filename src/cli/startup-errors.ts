import { inspect } from 'node:util';
import { ConfigError, EVENTSTORE_URL_FORM } from '../config';
import { EventLogAheadOfServerError, EventStoreUnreachableError } from '../main';
import { isAccessRefused, NoAnswerError, StartupStepError } from '../shared/startup-step';
import { scrubLogLine } from '../observability/logging';
import { CliUsageError } from './failure';

/** A start-up failure as the operator reads it: what went wrong, and what to do about it. */
export interface StartupProblem {
  cause: string;
  fix: string;
}

type Code = string | undefined;

const FS_REASONS: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ENOTDIR: 'a part of the path is a file, not a folder',
  ENOENT: 'a part of the path does not exist and cannot be created',
  EEXIST: 'a file of that name is in the way',
  ENOSPC: 'no space left on the device',
};

const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'connection reset',
};

const UNRESOLVED = ['ENOTFOUND', 'EAI_AGAIN'];

const codeOf = (err: unknown): Code => {
  const e = err as { code?: unknown; errors?: unknown[] } | undefined;
  if (typeof e?.code === 'string') return e.code;
  // Node's happy-eyeballs connect (localhost: ::1 and 127.0.0.1) fails with an AggregateError of the attempts
  return Array.isArray(e?.errors) ? codeOf(e.errors[0]) : undefined;
};

const messageOf = (err: unknown): string => oneLine(err instanceof Error ? err.message : String(err));

const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, ' ').trim();

const seconds = (ms: number | undefined) => `${Math.round((ms ?? 0) / 1000)} s`;

/** Names the cause of an error thrown while `serve` or `worker` started, and the fix. */
export function classifyStartupError(err: unknown): StartupProblem {
  if (err instanceof ConfigError) {
    return { cause: err.message, fix: 'correct those environment variables and start again' };
  }
  if (err instanceof StartupStepError) return classifyStep(err);
  if (err instanceof EventStoreUnreachableError) return eventStoreProblem(err);
  if (err instanceof EventLogAheadOfServerError) {
    return {
      cause: `${err.message}: the database was restored with pg_dump (or copied logically) into a server behind the one that wrote it, where new events would be ordered before the log and never read`,
      fix: 'restore a physical copy instead (pg_basebackup, or the data directory), or keep using the server that wrote it (docs/event-log.md, "Restoring a log")',
    };
  }
  return {
    cause: `start-up failed: ${messageOf(err)}`,
    fix: 'run again with LOG_LEVEL=debug for the stack trace',
  };
}

function classifyStep(err: StartupStepError): StartupProblem {
  const cause = err.cause;
  const code = codeOf(cause);
  switch (err.step) {
    case 'data-dir':
      return dataDirProblem(err.target, code, cause);
    case 'embedded-postgres':
      if (code && FS_REASONS[code]) return dataDirProblem(err.target, code, cause);
      return {
        cause: `the embedded Postgres in DATA_DIR ${err.target} did not start: ${messageOf(cause)}`,
        fix: 'see docs/install.md ("Running as root", "Start-up errors"), or set DATABASE_URL to a Postgres of your own',
      };
    case 'database':
      return databaseProblem(err, code, cause);
    case 'kafka':
      return {
        cause: `the Kafka brokers ${err.target} did not answer within ${seconds(err.waitedMs)}${cause instanceof NoAnswerError ? '' : ` (${messageOf(cause)})`}`,
        fix: 'start Kafka or correct KAFKA_BROKERS (unset it to run on the in-process transport; STARTUP_WAIT_S sets the wait)',
      };
    case 'http':
      return httpProblem(err.target, code, cause, 'PORT');
    case 'ops-http':
      return httpProblem(err.target, code, cause, 'WORKER_OPS_PORT');
  }
}

function dataDirProblem(dir: string, code: Code, cause: unknown): StartupProblem {
  const reason = (code && FS_REASONS[code]) ?? messageOf(cause);
  return {
    cause: `DATA_DIR ${dir} cannot be created or written (${reason})`,
    fix: 'set DATA_DIR to a folder this user can create and write, or set DATABASE_URL to a Postgres of your own',
  };
}

function databaseProblem(err: StartupStepError, code: Code, cause: unknown): StartupProblem {
  const at = `Postgres at ${err.target}`;
  if (code && UNREACHABLE[code]) {
    return {
      cause: `${at} is not reachable (${UNREACHABLE[code]}; retried for ${seconds(err.waitedMs)})`,
      fix: 'start Postgres or correct the host and port in DATABASE_URL (STARTUP_WAIT_S sets how long start-up waits)',
    };
  }
  if (code && UNRESOLVED.includes(code)) {
    return { cause: `the host of DATABASE_URL (${err.target}) does not resolve`, fix: 'correct the host in DATABASE_URL' };
  }
  switch (code) {
    case '28P01':
    case '28000':
      return { cause: `${at} refused the login (${messageOf(cause)})`, fix: 'correct the user and password in DATABASE_URL' };
    case '3D000':
      return { cause: `${at}: ${messageOf(cause)}`, fix: 'create that database, or correct its name in DATABASE_URL' };
    case '42501':
      return {
        cause: `${at}: the user of DATABASE_URL may not create the schema (${messageOf(cause)})`,
        fix: "grant that user CREATE on the database, or use the database's owner",
      };
    case '53300':
    case '57P03':
      return {
        cause: `${at} did not accept connections within ${seconds(err.waitedMs)} (${messageOf(cause)})`,
        fix: 'wait until Postgres accepts connections (raise its max_connections if it is full), then start again',
      };
  }
  if (/timeout/i.test(messageOf(cause))) {
    return {
      cause: `${at} did not answer within ${seconds(err.waitedMs)} (${messageOf(cause)})`,
      fix: 'start Postgres or correct the host and port in DATABASE_URL',
    };
  }
  return { cause: `${at} failed during start-up: ${messageOf(cause)}`, fix: "check DATABASE_URL and the Postgres server's log" };
}

const EVENT_STORE_FIX = `start EventStoreDB or correct the host and port in EVENTSTORE_URL (${EVENTSTORE_URL_FORM} for a server without TLS; STARTUP_WAIT_S sets the wait)`;

/** EventStoreDB did not answer: the gRPC client's message carries the socket's reason (`connect ECONNREFUSED ...`). */
function eventStoreProblem(err: EventStoreUnreachableError): StartupProblem {
  const at = `EventStoreDB at ${err.target} (EVENTSTORE_URL)`;
  const message = messageOf(err.cause);
  if (isAccessRefused(err.cause)) {
    return {
      cause: `${at} refused the credentials of EVENTSTORE_URL (${message})`,
      fix: 'correct the user name and password in EVENTSTORE_URL (esdb://user:password@host:2113), or give that user access',
    };
  }
  const socketCode = /\bconnect (E[A-Z]+)\b/.exec(message)?.[1];
  if (socketCode && UNREACHABLE[socketCode]) {
    return { cause: `${at} is not reachable (${UNREACHABLE[socketCode]}; retried for ${seconds(err.waitedMs)})`, fix: EVENT_STORE_FIX };
  }
  if (/Name resolution failed|\b(ENOTFOUND|EAI_AGAIN)\b/.test(message)) {
    return { cause: `the host of EVENTSTORE_URL (${err.target}) does not resolve`, fix: 'correct the host in EVENTSTORE_URL' };
  }
  return {
    cause: `${at} did not answer within ${seconds(err.waitedMs)}${err.cause instanceof NoAnswerError ? '' : ` (${message})`}`,
    fix: EVENT_STORE_FIX,
  };
}

/** A listener that could not start; `portVariable` names the setting of its port. */
function httpProblem(address: string, code: Code, cause: unknown, portVariable: 'PORT' | 'WORKER_OPS_PORT'): StartupProblem {
  const [host, port] = [address.slice(0, address.lastIndexOf(':')), address.slice(address.lastIndexOf(':') + 1)];
  switch (code) {
    case 'EADDRINUSE':
      return { cause: `port ${port} on ${host} is already in use by another process`, fix: `stop that process or set ${portVariable} to a free port` };
    case 'EACCES':
      return { cause: `this user may not listen on port ${port} (below 1024)`, fix: `set ${portVariable} to 1024 or above` };
    case 'EADDRNOTAVAIL':
      return { cause: `HOST ${host} is not an address of this machine`, fix: 'set HOST to one of its addresses (127.0.0.1, or 0.0.0.0 for all)' };
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return { cause: `HOST ${host} does not resolve`, fix: 'set HOST to an address of this machine (127.0.0.1, or 0.0.0.0 for all)' };
  }
  return { cause: `cannot listen on ${address}: ${messageOf(cause)}`, fix: `check HOST and ${portVariable}` };
}

/** The one line printed for a failed start. */
export function startupFailureLine(problem: StartupProblem): string {
  return `switchboard: cannot start: ${problem.cause}; ${problem.fix}`;
}

/** Prints the line on stderr; with `debug`, the whole error (stack and causes) after it. */
export function reportStartupFailure(err: unknown, debug: boolean, write: (text: string) => void = (t) => process.stderr.write(t)): void {
  write(`${scrubLogLine(startupFailureLine(classifyStartupError(err)))}\n`);
  if (debug) write(`${scrubLogLine(inspect(err, { depth: 6 }))}\n`);
}

/**
 * What a one-shot command prints when it fails: a mistake in its arguments or input as its message, an invalid
 * configuration or a failed start (database, data folder, event store) as the start-up line with its fix, as `serve`; anything else is a fault
 * of the service and keeps its stack trace. With `debug`, every failure is followed by the whole error. Phone numbers
 * written with `+` and provider message ids are masked as in a log line (`scrubLogLine`, docs/privacy.md): an
 * unexpected error's message can hold a customer's number (a stream id `contactphone-12-+549…`).
 */
export function cliFailureText(err: unknown, debug: boolean): string {
  return scrubLogLine(failureText(err, debug));
}

function failureText(err: unknown, debug: boolean): string {
  const details = debug ? `\n${inspect(err, { depth: 6 })}` : '';
  if (err instanceof CliUsageError) return `switchboard: ${err.message}${details}`;
  if (err instanceof ConfigError || err instanceof StartupStepError || err instanceof EventStoreUnreachableError || err instanceof EventLogAheadOfServerError) {
    return `${startupFailureLine(classifyStartupError(err))}${details}`;
  }
  return `switchboard: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`;
}
