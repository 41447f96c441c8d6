import type { Command } from 'commander';
import { DomainError } from '../commands/decider';
import { issueApiKey, listKeys, revokeApiKey } from '../commands/provisioning/keys';
import type { Services } from '../services';
import { positiveId } from './args';
import { exitOnFailure, failWith } from './failure';
import { withCliRuntime } from './runtime';

/**
 * A keys sub-command against the configured backends; a broken rule prints its message and exits 1. `left`: what an
 * interruption (SIGTERM, SIGINT) leaves, when the command changes something.
 */
const keysAction = (fn: (s: Services) => Promise<void>, left?: string) =>
  exitOnFailure(() =>
    withCliRuntime(async (s) => {
      try {
        await fn(s);
      } catch (err) {
        failWith('switchboard', err);
      }
    }, left),
  );

export function registerKeyCommands(program: Command): void {
  const keys = program.command('keys').description('API keys: issue (the clear key is printed once), revoke, list');

  keys
    .command('issue')
    .description('issue a key; prints the clear key once on stdout (only its keyed hash is stored)')
    .option('--company <id>', 'company of a company key', positiveId)
    .requiredOption('--name <name>', 'a name for the key (reported as apiKeyName)')
    .option('--user <id>', 'user owning the key (created_by of its bulk sends)', positiveId)
    .option('--expires <iso>', 'expiry, ISO 8601 (default: never)')
    .option('--global', 'a global (cross-company) key: no --company')
    .action((opts: { company?: number; name: string; user?: number; expires?: string; global?: boolean }) =>
      keysAction(async (s) => {
        const issued = await issueApiKey(s, {
          scope: opts.global ? 'global' : 'company', companyId: opts.company, name: opts.name, userId: opts.user, expiresAt: opts.expires,
        }, { actor: 'cli' });
        process.stderr.write(`issued ${issued.keyId} (${opts.global ? 'global' : `company ${opts.company}`}, "${opts.name.trim()}"); the key is shown once:\n`);
        process.stdout.write(`${issued.key}\n`);
      }, `the key may have been issued without being shown: if \`switchboard keys list\` shows one named "${opts.name.trim()}" that you did not get, revoke it and issue another`),
    );

  keys
    .command('revoke')
    .argument('<keyId>', 'the key id (see `keys list`)')
    .option('--reason <text>', 'why (kept in the event)')
    .description('revoke a key: rejected with 401 from the next request on')
    .action((keyId: string, opts: { reason?: string }) =>
      keysAction(async (s) => {
        const revoked = await revokeApiKey(s, keyId, { actor: 'cli', reason: opts.reason }).catch((err: unknown) => {
          // a mistyped id, most likely: say where the ids are
          if (err instanceof DomainError && err.code === 'KEY_NOT_FOUND') throw new DomainError(err.code, `${err.message}; \`switchboard keys list\` shows the key ids`);
          throw err;
        });
        process.stdout.write(revoked ? `revoked ${keyId}\n` : `${keyId} was already revoked\n`);
      }, 'run the same command again to be sure the key is revoked (revoking twice changes nothing)'),
    );

  keys
    .command('list')
    .description('key ids, names and status (never a key)')
    .option('--company <id>', 'only this company', positiveId)
    .option('--json', 'one JSON object per line')
    .action((opts: { company?: number; json?: boolean }) =>
      keysAction(async (s) => {
        const rows = await listKeys(s, opts.company);
        if (opts.json) {
          for (const r of rows) process.stdout.write(`${JSON.stringify(r)}\n`);
          return;
        }
        const table = [['KEY ID', 'SCOPE', 'COMPANY', 'USER', 'STATUS', 'EXPIRES', 'NAME']].concat(
          rows.map((r) => [r.keyId, r.scope, r.companyId === null ? '-' : String(r.companyId), r.userId === null ? '-' : String(r.userId),
            r.status, r.expiresAt ?? 'never', r.name]),
        );
        const widths = table[0].map((_, i) => Math.max(...table.map((row) => row[i].length)));
        for (const row of table) process.stdout.write(`${row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i] + 2))).join('')}\n`);
      }),
    );
}
