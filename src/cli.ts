#!/usr/bin/env node
import { Command } from 'commander';
import { loadConfig } from './config';
import { cliFailureText } from './cli/startup-errors';
import { startRuntime } from './main';
import { registerEventCommands } from './cli/events';
import { registerProjectionCommands } from './cli/projections';
import { registerServeCommands } from './cli/serve';
import { registerDemoCommands } from './cli/demo';
import { registerKeyCommands } from './cli/keys';
import { registerSeedCommands } from './cli/seed';
import { registerImportMessagesCommands } from './cli/import-messages';
import { registerCompanyCommands } from './cli/companies';

// The `switchboard` command. Each group registers its sub-commands; add new groups here.
export function buildCli(): Command {
  const program = new Command('switchboard')
    .description('Switchboard: business-messaging API (event-sourced). Configuration comes from the environment.')
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
  buildCli()
    .parseAsync(process.argv)
    .catch((err: unknown) => {
      process.stderr.write(`${cliFailureText(err, ['debug', 'trace'].includes(process.env.LOG_LEVEL ?? ''))}\n`);
      process.exit(1);
    });
}
