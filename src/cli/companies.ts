import type { Command } from 'commander';
import { setCompanyRateLimit } from '../commands/provisioning/rate-limits';
import { readModelsUpToDate } from '../commands/provisioning/read-models';
import { listCompanyRateLimits } from '../projections/ratelimits/queries';
import type { Services } from '../services';
import { positiveId, positiveInt } from './args';
import { CliUsageError, exitOnFailure, failWith } from './failure';
import { withCliRuntime } from './runtime';

/** `left`: what an interruption (SIGTERM, SIGINT) leaves, when the command changes something. */
const companiesAction = (fn: (s: Services) => Promise<void>, left?: string) =>
  exitOnFailure(() =>
    withCliRuntime(async (s) => {
      try {
        await fn(s);
      } catch (err) {
        failWith('switchboard', err);
      }
    }, left),
  );

export function registerCompanyCommands(program: Command): void {
  const companies = program.command('companies').description("companies' operational settings: request rate limits (docs/rate-limits.md)");

  companies
    .command('rate-limit')
    .description('set the requests per minute each API key of a company may make (every serve process applies it within 5 s)')
    .requiredOption('--company <id>', 'the company', positiveId)
    .option('--per-minute <n>', 'requests per API key and minute', positiveInt)
    .option('--default', 'back to the service default (RATE_LIMIT_PER_MINUTE)')
    .action((opts: { company: number; perMinute?: number; default?: boolean }) => {
      if ((opts.perMinute === undefined) === (opts.default !== true)) {
        throw new CliUsageError('companies rate-limit takes exactly one of --per-minute <n> and --default');
      }
      return companiesAction(async (s) => {
        const perMinute = opts.perMinute ?? null;
        const changed = await setCompanyRateLimit(s, opts.company, perMinute, { actor: 'cli' });
        const what = perMinute === null ? 'the default limit' : `${perMinute} requests per minute per API key`;
        process.stdout.write(`company ${opts.company}: ${what}${changed ? '' : ' (unchanged)'}\n`);
      }, 'the limit may or may not be set: run the same command again (setting it twice changes nothing)');
    });

  companies
    .command('rate-limits')
    .description('the companies with their own limit (every other company has RATE_LIMIT_PER_MINUTE)')
    .action(() =>
      companiesAction(async (s) => {
        await readModelsUpToDate(s, ['ratelimits']);
        process.stdout.write(`default: ${s.config.rateLimit.perMinute} requests per minute per API key${s.config.rateLimit.enabled ? '' : ' (rate limiting is off)'}\n`);
        for (const l of await listCompanyRateLimits(s.pool)) {
          process.stdout.write(`company ${l.companyId}: ${l.perMinute} (set ${l.setAt.toISOString()})\n`);
        }
      }),
    );
}
