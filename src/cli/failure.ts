import { DomainError } from '../commands/decider';
import { FixtureContactsError } from '../commands/contact/fixture';
import { FixtureError } from '../commands/provisioning/fixture';
import { scrubLogLine } from '../observability/logging';

/** An expected failure whose message was already printed: the command exits 1 without a stack trace. */
export class CliFailure extends Error {
  override name = 'CliFailure';
}

/** A mistake in the command's arguments or input (a missing file, an unknown name): one line, no stack trace. */
export class CliUsageError extends Error {
  override name = 'CliUsageError';
}

/**
 * Runs a CLI action; an expected failure exits with status 1 once the runtime has stopped. (`process.exitCode`
 * is not enough: the embedded Postgres's exit hook ends the process with 0 on `beforeExit`.)
 */
export async function exitOnFailure(action: () => Promise<unknown>): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (!(err instanceof CliFailure)) throw err;
    process.exit(1);
  }
}

/**
 * Prints an expected failure (invalid document, broken rule) after `prefix` (the CLI's commands: `switchboard`, as
 * every user error, docs/install.md) and throws CliFailure; rethrows others. An invalid fixture: its problems one a
 * line under the first, then `nothing was appended`. Masked as a log line is (`scrubLogLine`), as `cliFailureText` is.
 */
export function failWith(prefix: string, err: unknown): never {
  if (err instanceof FixtureError) process.stderr.write(scrubLogLine(`${prefix}: ${err.message}\nnothing was appended\n`));
  else if (err instanceof FixtureContactsError || err instanceof DomainError) process.stderr.write(scrubLogLine(`${prefix}: ${err.message}\n`));
  else throw err;
  throw new CliFailure(err.message);
}
