import type { Command } from 'commander';
import type { Logger } from 'pino';
import { type Config, loadConfig } from '../config';
import { createLogger, type Role, type Runtime, startRuntime } from '../main';
import { serviceLogOutput } from './log-output';
import { reportStartupFailure } from './startup-errors';
import { whenNpmLauncherGone } from './launcher-watch';
import { onStopSignals } from './stop-signals';

export function registerServeCommands(program: Command): void {
  program
    .command('serve')
    .description('HTTP API + workers (projection runner, consumers, bulk dispatcher, cron jobs)')
    .action(() => run('serve'));
  program
    .command('worker')
    .description('workers only (no API; /healthz and /metrics on WORKER_OPS_PORT when set): scale API and workers apart')
    .action(() => run('worker'));
}

/** How long a graceful stop may take before the process exits anyway (docs/core.md, "Runtime"). */
export const FORCED_EXIT_MS = 30_000;
/** How long the exit waits at most for a log reader that fell behind (a shipper under load) to take the last lines. */
const LOG_DRAIN_MS = 5_000;

async function run(role: Exclude<Role, 'cli'>): Promise<void> {
  const started = Date.now();
  const config = loadOrExit();
  const output = serviceLogOutput();
  const log = createLogger(config, output);
  // Listening from the very start: a signal during start-up (a wait for Kafka, say) stops what started once it has,
  // rather than killing the process by default and orphaning the embedded Postgres it spawned.
  const stop = listenForStopSignals(log, config.http.shutdownDelayMs);
  whenNpmLauncherGone(() => {
    log.info('the npm process that started this one is gone (a SIGTERM to `npm start`): stopping as on SIGTERM');
    process.kill(process.pid, 'SIGTERM');
  });
  const runtime = await start(config, role, log);
  const signalledDuringStart = stop.requested();
  if (signalledDuringStart) log.info('start-up done after a stop signal: not announcing it, stopping');
  else if (runtime.url) process.stdout.write(`switchboard listening on ${runtime.url} (ready in ${Date.now() - started} ms)\n`);
  else if (runtime.opsUrl) process.stdout.write(`switchboard worker started; /healthz, /readyz and /metrics on ${runtime.opsUrl} (ready in ${Date.now() - started} ms)\n`);
  else log.info({ ms: Date.now() - started }, 'worker started');
  const hooksDone = runStartedHooks(runtime, stop.requested);
  await stop.signalled;
  await runtime.beginStop({ delay: !signalledDuringStart });
  await hooksDone;
  await runtime.stop();
  await output.drain(LOG_DRAIN_MS);
  process.exit(0);
}

/**
 * The first stop signal asks for a graceful stop and arms the forced exit (after the shutdown delay, which serves on,
 * plus FORCED_EXIT_MS); any later one (either signal) exits at once. Both forced exits go through process.exit (code
 * 1), so the exit hooks still stop the embedded Postgres (Node's default for a signal with no listener would kill the
 * process and leave it running).
 */
function listenForStopSignals(log: Logger, shutdownDelayMs: number): { signalled: Promise<void>; requested: () => boolean } {
  let resolveSignalled!: () => void;
  const signalled = new Promise<void>((ok) => (resolveSignalled = ok));
  const signals = onStopSignals({
    first: (signal) => {
      log.info({ signal }, 'shutting down: no new requests, finishing in-flight work');
      resolveSignalled();
    },
    again: (signal, first) => {
      log.error({ signal, first }, 'second signal during shutdown; exiting now');
      process.exit(1);
    },
    forcedAfterMs: shutdownDelayMs + FORCED_EXIT_MS,
    forced: (signal) => {
      log.error({ signal, ms: shutdownDelayMs + FORCED_EXIT_MS }, 'shutdown took too long; exiting');
      process.exit(1);
    },
  });
  return { signalled, requested: () => signals.received() !== undefined };
}

async function runStartedHooks(runtime: Runtime, stopRequested: () => boolean): Promise<void> {
  for (const hook of onServeStarted) {
    if (stopRequested()) return;
    try {
      await hook(runtime);
    } catch (err) {
      runtime.services.logger.error({ err }, 'start-up hook failed');
    }
  }
}

/** A failed start prints one line (the stack only with LOG_LEVEL=debug) and exits 1; startRuntime stopped what it started. */
function loadOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    return exitOnStartupFailure(err);
  }
}

async function start(config: Config, role: Exclude<Role, 'cli'>, logger: Logger): Promise<Runtime> {
  try {
    return await startRuntime(config, role, { logger });
  } catch (err) {
    return exitOnStartupFailure(err);
  }
}

function exitOnStartupFailure(err: unknown): never {
  reportStartupFailure(err, ['debug', 'trace'].includes(process.env.LOG_LEVEL ?? ''));
  process.exit(1);
}

/** Hooks run once `serve`/`worker` is up (e.g. the demo seeding on a fresh data dir). */
export const onServeStarted: Array<(runtime: Awaited<ReturnType<typeof startRuntime>>) => Promise<void>> = [];
