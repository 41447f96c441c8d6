import type { Command } from 'commander';
import { loadConfig } from '../config';
import { type Role, startRuntime } from '../main';

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
  const config = loadConfig();
  const runtime = await startRuntime(config, role);
  const log = runtime.services.logger;
  if (runtime.url) process.stdout.write(`switchboard listening on ${runtime.url} (ready in ${Date.now() - started} ms)\n`);
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

/** Hooks run once `serve`/`worker` is up (e.g. the demo seeding on a fresh data dir). */
export const onServeStarted: Array<(runtime: Awaited<ReturnType<typeof startRuntime>>) => Promise<void>> = [];
