import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';

// Found in review: WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY=0x10 started a service allowing 16 endpoints, and
// STARTUP_WAIT_S=1e3 waited 1000 s. A number not in decimal digits is refused at start, in the usual one line.

const d = describeWithBuiltCli('config numbers suite');

d('numbers in the environment (built CLI)', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sb-config-numbers-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const run = (args: string[], extra: NodeJS.ProcessEnv) => {
    const r = spawnSync(process.execPath, [CLI, ...args], {
      cwd: ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: join(dir, 'data'), PORT: '0', ...extra }, encoding: 'utf8', timeout: 60_000,
    });
    return { status: r.status, lines: r.stderr.split('\n').filter((l) => l.trim() !== ''), stderr: r.stderr };
  };

  it.each([['serve'], ['worker'], ['keys', 'list']])('%s names the variable and what to write, and starts nothing', (...args) => {
    const r = run(args, { WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '0x10', STARTUP_WAIT_S: '1e3' });
    expect({ status: r.status, lines: r.lines }).toEqual({
      status: 1,
      lines: [
        'switchboard: cannot start: invalid configuration: STARTUP_WAIT_S: a whole number from 1 to 3600, in decimal digits; '
          + 'WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: a whole number from 1 to 100000, in decimal digits; correct those environment variables and start again',
      ],
    });
    expect(r.stderr).not.toMatch(STACK_LINE);
  });
});
