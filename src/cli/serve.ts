import type { Command } from 'commander';
import { loadConfig } from '../config';
import { type Role, type Runtime, startRuntime } from '../main';
import { reportStartupFailure } from './startup-errors';

export function registerServeCommands(program: Command): void {
  program
    .command('serve')
    .description('HTTP API + workers (projection runner, consumers, bulk dispatcher, cron jobs)')
    .action(() => run('serve'));
  program
    .command('worker')
    .description('workers only (no HTTP): scale API and workers apart')
    .action(() => run('worker'));
}

async function run(role: Exclude<Role, 'cli'>): Promise<void> {
  const started = Date.now();
  const runtime = await start(role);
  const log = runtime.services.logger;
  if (runtime.url) process.stdout.write(`switchboard listening on ${runtime.url} (ready in ${Date.now() - started} ms)\n`);
  else if (runtime.opsUrl) process.stdout.write(`switchboard worker started; /healthz, /readyz and /metrics on ${runtime.opsUrl} (ready in ${Date.now() - started} ms)\n`);
  else log.info({ ms: Date.now() - started }, 'worker started');
  let stopping = false;
  let hooksDone: Promise<void> = Promise.resolve();
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: no new requests, finishing in-flight work');
    const force = setTimeout(() => {
      log.error('shutdown took too long; exiting');
      process.exit(1);
    }, 30_000);
    force.unref();
    await hooksDone;
    await runtime.stop();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));

  hooksDone = (async () => {
    for (const hook of onServeStarted) {
      if (stopping) return;
      try {
        await hook(runtime);
      } catch (err) {
        log.error({ err }, 'start-up hook failed');
      }
    }
  })();
  await hooksDone;
}

/** A failed start prints one line (the stack only with LOG_LEVEL=debug) and exits 1; startRuntime stopped what it started. */
async function start(role: Exclude<Role, 'cli'>): Promise<Runtime> {
  try {
    return await startRuntime(loadConfig(), role);
  } catch (err) {
    reportStartupFailure(err, ['debug', 'trace'].includes(process.env.LOG_LEVEL ?? ''));
    process.exit(1);
  }
}

/** Hooks run once `serve`/`worker` is up (e.g. the demo seeding on a fresh data dir). */
export const onServeStarted: Array<(runtime: Awaited<ReturnType<typeof startRuntime>>) => Promise<void>> = [];
