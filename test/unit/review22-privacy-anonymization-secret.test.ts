import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config';
import { BUILT_CLI, describeWithBuiltCli, STACK_LINE } from '../support/e2e-server';
import { MP_ANON_SECRET } from '../support/multi-process';
import { TEST_ANON_SECRET } from '../support/services';

// Review 22 (docs/privacy.md, "ANONYMIZATION_SECRET"): the export shows real ids beside their keyed HMACs, so a short
// ANONYMIZATION_SECRET is found offline by trying secrets, and then every customer's `ctc_` by trying numbers. A start
// took `ANONYMIZATION_SECRET=k3y-2024` (8 characters) without a word. It is refused now, below 16 characters, in one
// line naming the variable, the cause and the fix, never the value.

const PRODUCTION = { DATABASE_URL: 'postgres://u:p@db.example:5432/app', API_KEY_PEPPER: 'p'.repeat(32) };

describe('review 22: ANONYMIZATION_SECRET shorter than 16 characters is refused', () => {
  it.each(['k3y-2024', 'Q', 'fifteen-chars-x', 'ñandú-secretito'.slice(0, 15)])('refuses %j, naming cause and fix, not the value', (secret) => {
    const attempt = () => loadConfig({ ...PRODUCTION, ANONYMIZATION_SECRET: secret });
    expect(attempt).toThrow(ConfigError);
    const message = (() => { try { attempt(); } catch (err) { return (err as Error).message; } return ''; })();
    const chars = [...secret].length;
    expect(message).toBe(
      `invalid configuration: ANONYMIZATION_SECRET: too short (${chars} character${chars === 1 ? '' : 's'}, at least 16): the export's anonymized ids could be `
        + "reversed by guessing it; set 32 random bytes, e.g. `openssl rand -hex 32` (changing it changes every exported id; docs/privacy.md)",
    );
    expect(message).not.toContain(secret);
  });

  it('refuses it on the embedded default too (no DATABASE_URL), where a given secret is used as given', () => {
    expect(() => loadConfig({ ANONYMIZATION_SECRET: 'k3y-2024' })).toThrow(/ANONYMIZATION_SECRET: too short \(8 characters, at least 16\)/);
  });

  it("takes 16 characters, 32 random bytes, the compose file's default and every secret the tests and bench use", () => {
    const compose = readFileSync(join(__dirname, '..', '..', 'docker-compose.yml'), 'utf8');
    const composeDefault = /ANONYMIZATION_SECRET: \$\{ANONYMIZATION_SECRET:-([^}]+)\}/.exec(compose)?.[1];
    expect(composeDefault).toBeDefined();
    const taken = [
      'a'.repeat(16), randomBytes(32).toString('hex'), randomBytes(32).toString('base64'), composeDefault!,
      TEST_ANON_SECRET, MP_ANON_SECRET, 'e2e-anonymization-secret-0123456789', 'bench-anonymization-secret-0123456789',
      // test/e2e/*: the shortest ones
      'startup-errors-anon', 'rebuild-running-anon', 'event-store-errors-anon', 'r14-export-anonymization',
    ];
    for (const secret of taken) {
      expect(loadConfig({ ...PRODUCTION, ANONYMIZATION_SECRET: secret }).secrets.anonymizationSecret).toBe(secret);
    }
    expect(loadConfig({ ANONYMIZATION_SECRET: ' ' }).secrets.anonymizationSecret).toBeUndefined(); // blank: unset, generated
  });
});

const d = describeWithBuiltCli('review 22 ANONYMIZATION_SECRET start');

d('review 22: serve with a short ANONYMIZATION_SECRET', () => {
  it('exits 1 with one line on stderr, no stack trace, without the secret', () => {
    const secret = 'k3y-2024';
    const run = spawnSync(process.execPath, [BUILT_CLI, 'serve'], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...PRODUCTION, ANONYMIZATION_SECRET: secret },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const lines = run.stderr.split('\n').filter((l) => l.trim() !== '');
    expect({ status: run.status, lines: lines.length }).toEqual({ status: 1, lines: 1 });
    expect(lines[0]).toMatch(/^switchboard: cannot start: invalid configuration: ANONYMIZATION_SECRET: too short \(8 characters, at least 16\): .*openssl rand -hex 32/);
    expect(run.stderr + run.stdout).not.toContain(secret);
    expect(run.stderr).not.toMatch(STACK_LINE);
  });
});
