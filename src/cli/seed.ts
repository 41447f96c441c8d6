import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { formatSeedSummary, seedFixture } from '../commands/provisioning/seed';
import { CliFailure, exitOnFailure, failWith } from './failure';
import { progress, progressDone, withCliRuntime } from './runtime';

export function registerSeedCommands(program: Command): void {
  program
    .command('seed')
    .argument('<file>', 'fixture JSON (shared/contracts/fixture.md)')
    .description('provision companies, numbers, templates, keys, lists, branches and holidays from a fixture; idempotent')
    .action((file: string) =>
      exitOnFailure(async () => {
        let document: unknown;
        try {
          document = JSON.parse(readFileSync(file, 'utf8'));
        } catch (err) {
          process.stderr.write(`seed: cannot read ${file}: ${(err as Error).message}\n`);
          throw new CliFailure('unreadable fixture');
        }
        await withCliRuntime(async (s) => {
          try {
            const summary = await seedFixture(s, document, { actor: 'cli', onProgress: progress });
            progressDone();
            process.stdout.write(`${formatSeedSummary(summary)}\n`);
          } catch (err) {
            progressDone();
            failWith('seed', err);
          }
        });
      }),
    );
}
