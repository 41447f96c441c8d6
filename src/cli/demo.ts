import type { Command } from 'commander';
import type { Config } from '../config';
import { type DemoResult, demoExamples, seedDemo } from '../commands/provisioning/demo';
import { formatSeedSummary } from '../commands/provisioning/seed';
import type { Runtime } from '../main';
import { START } from '../ports/event-store';
import { businessProjection } from '../projections/business/projection';
import { anyCompanyRegistered } from '../projections/business/queries';
import { onServeStarted } from './serve';
import { progress, progressDone, withCliRuntime } from './runtime';
import { exitOnFailure, failWith } from './failure';

export function registerDemoCommands(program: Command): void {
  program
    .command('demo')
    .description('seed a demo company and print a ready API key and example requests')
    .action(() =>
      exitOnFailure(() =>
        withCliRuntime(async (s) => {
          try {
            const result = await seedDemo(s, { actor: 'cli', onProgress: progress });
            progressDone();
            process.stderr.write(`${formatSeedSummary(result.summary)}\n`);
            printDemo(result, baseUrlOf(s.config), s.now());
          } catch (err) {
            progressDone();
            failWith('switchboard', err);
          }
        }, 'run `switchboard demo` again for the demo company and a key shown'),
      ),
    );
}

function printDemo(result: DemoResult, baseUrl: string, now: Date): void {
  const lines = [
    `demo company ${result.companyId} is ready. Its API key (shown once, not stored in clear anywhere):`,
    '',
    `  ${result.key}`,
    '',
    'Try:',
    ...demoExamples(baseUrl, result.key, now).map((c) => `  ${c}`),
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

function baseUrlOf(config: Config): string {
  const host = ['0.0.0.0', '::', ''].includes(config.http.host) ? '127.0.0.1' : config.http.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.http.port}`;
}

/**
 * First `npm start` on a fresh embedded data dir: seed the demo and print its key. Only for `serve` on the
 * embedded database (never against DATABASE_URL), and only when no company was ever registered.
 */
export async function seedDemoOnFreshStart(runtime: Runtime): Promise<void> {
  const s = runtime.services;
  if (!runtime.url || s.config.databaseUrl) return;
  try {
    const head = await s.store.headPosition();
    if (head !== START) await s.runner.waitFor(head, [businessProjection], 60_000);
    if (await anyCompanyRegistered(s.pool)) return;
    const result = await seedDemo(s, { actor: 'system' });
    process.stdout.write('fresh data directory: ');
    printDemo(result, runtime.url.replace('://localhost', '://127.0.0.1'), s.now());
  } catch (err) {
    s.logger.warn({ err }, 'could not seed the demo company');
  }
}

onServeStarted.push(seedDemoOnFreshStart);
