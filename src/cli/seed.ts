import type { Command } from 'commander';
import { formatSeedSummary, seedFixture } from '../commands/provisioning/seed';
import { CliUsageError, exitOnFailure, failWith } from './failure';
import { openInputFile } from './input-file';
import { progress, progressDone, withCliRuntime } from './runtime';

/** Where a fixture's format is written down and an example of one, relative to the project's folder. */
const FIXTURE_CONTRACT = '../shared/contracts/fixture.md';
const FIXTURE_HELP = `a fixture is one JSON document (format: ${FIXTURE_CONTRACT}; example: ../shared/contracts/example-fixture.json)`;

/** The fixture document in `file`; a file that cannot be read or is not JSON is one line naming it and the fix. */
async function readFixture(file: string): Promise<unknown> {
  const handle = await openInputFile(file, { fix: FIXTURE_HELP, empty: 'no fixture in it', pipes: true });
  let text: string;
  try {
    text = await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
  try {
    // a file saved with a UTF-8 byte-order mark (Notepad, PowerShell 5's utf8), as import-messages reads it
    return JSON.parse(text.replace(/^\ufeff/, ''));
  } catch (err) {
    throw new CliUsageError(`${file} is not JSON (${withoutQuotedText((err as Error).message)}); ${FIXTURE_HELP}`);
  }
}

/**
 * JSON.parse's message without the text it quotes (`Unexpected token ',', ..."55551234"},,]" is not valid JSON`): a
 * fixture holds customers' phone numbers and names, and the line goes to a terminal or a CI log. What is left names
 * the fault (`Unexpected token ','`, `... at position 27`).
 */
const withoutQuotedText = (message: string): string => message.replace(/, (?:\.\.\.)?"[\s\S]*"(?:\.\.\.)? is not valid JSON$/, '');

export function registerSeedCommands(program: Command): void {
  program
    .command('seed')
    .argument('<file>', `fixture JSON (${FIXTURE_CONTRACT})`)
    .description('provision companies, numbers, templates, keys, lists, branches and holidays from a fixture; idempotent')
    .action(async (file: string) => {
      const document = await readFixture(file);
      await exitOnFailure(() =>
        withCliRuntime(async (s) => {
          try {
            const summary = await seedFixture(s, document, { actor: 'cli', onProgress: progress });
            progressDone();
            process.stdout.write(`${formatSeedSummary(summary)}\n`);
          } catch (err) {
            progressDone();
            failWith('switchboard', err);
          }
        }, 'seeding is idempotent: run the same seed again to apply the rest of the fixture'),
      );
    });
}
