import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';

// `switchboard events export` (built CLI): a --limit or --company that is not what the option takes is one
// line naming the option and what it expects, exit 1, before any database starts (docs/export.md, 2026-11-27).

const d = describeWithBuiltCli('CLI events export arguments suite');

d('events export: option values are checked', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'switchboard-events-args-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const run = (args: string[]) => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: join(dir, 'data') };
    delete env.DATABASE_URL;
    delete env.LOG_LEVEL;
    const r = spawnSync(process.execPath, [CLI, 'events', 'export', ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, lines: r.stderr.split('\n').filter((l) => l.trim() !== '') };
  };

  const POSITIVE = 'A positive integer is expected.';
  const COMPANY_LIST = 'A positive integer or a comma-separated list of positive integers is expected.';
  it.each([
    ['--limit', 'ten', '<n>', POSITIVE],
    ['--limit', '0', '<n>', POSITIVE],
    ['--limit', '2.5', '<n>', POSITIVE],
    ['--company', 'abc', '<ids>', COMPANY_LIST],
    ['--company', '7,abc', '<ids>', COMPANY_LIST],
    ['--company', '7,,9', '<ids>', COMPANY_LIST],
  ])('%s %s: one line naming the option, exit 1, nothing exported', (option, value, placeholder, expected) => {
    const r = run([option, value]);
    expect(r.status).toBe(1);
    expect(r.lines[0]).toBe(`error: option '${option} ${placeholder}' argument '${value}' is invalid. ${expected}`);
    expect(r.stdout).toBe('');
    expect(r.stderr).not.toMatch(STACK_LINE);
  });
});
