#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { loadConfig } from './config';
import { cliFailureText } from './cli/startup-errors';
import { surviveClosedStderr } from './cli/stderr-gone';
import { startRuntime } from './main';
import { registerEventCommands } from './cli/events';
import { registerProjectionCommands } from './cli/projections';
import { registerServeCommands } from './cli/serve';
import { registerDemoCommands } from './cli/demo';
import { registerKeyCommands } from './cli/keys';
import { registerSeedCommands } from './cli/seed';
import { registerImportMessagesCommands } from './cli/import-messages';
import { registerCompanyCommands } from './cli/companies';

/** The version of package.json, next to `src/` and `dist/` alike. */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown (package.json not found)';
  }
}

// The `switchboard` command. Each group registers its sub-commands; add new groups here. Without a command it
// prints its help on stderr and exits 1, as for any other mistake in the arguments (docs/install.md).
export function buildCli(): Command {
  const program = new Command('switchboard')
    .description('Switchboard: business-messaging API (event-sourced). Configuration comes from the environment.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .showHelpAfterError();
  registerServeCommands(program);
  registerProjectionCommands(program);
  registerEventCommands(program);
  registerSeedCommands(program);
  registerDemoCommands(program);
  registerKeyCommands(program);
  registerImportMessagesCommands(program);
  registerCompanyCommands(program);
  return program;
}

export { loadConfig, startRuntime };

if (require.main === module) {
  surviveClosedStderr();
  buildCli()
    .parseAsync(process.argv)
    .catch((err: unknown) => {
      process.stderr.write(`${cliFailureText(err, ['debug', 'trace'].includes(process.env.LOG_LEVEL ?? ''))}\n`);
      process.exit(1);
    });
}
