import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';

// One-shot commands (the built CLI): a mistake in the arguments or the input, or a start the user's settings make
// fail, prints one line naming it and exits 1, with no stack trace unless LOG_LEVEL=debug. Each case fails before
// the command touches a database.

const dirs: string[] = [];
const env = (extra: Record<string, string> = {}) => {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-cli-errors-'));
  dirs.push(dir);
  const base = { ...process.env };
  delete base.DATABASE_URL;
  delete base.LOG_LEVEL;
  return { ...base, DATA_DIR: join(dir, 'data'), ...extra };
};

function run(args: string[], extra?: Record<string, string>) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, env: env(extra), encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, lines: r.stderr.split('\n').filter((l) => l.trim() !== '') };
}

const d = describeWithBuiltCli('CLI errors suite');

d('one-shot commands: one line for a mistake the user can fix (built CLI)', () => {
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const NO_DATA_DIR = { DATA_DIR: '/proc/switchboard-nope' };
  // commander follows its own argument errors with the command's usage (`usage`); ours are the one line alone
  it.each([
    ['import-messages of a missing file', ['import-messages', '/nonexistent/messages.ndjson'], {}, /^switchboard: cannot read \/nonexistent\/messages\.ndjson: no such file$/, 'alone'],
    ['rebuild of an unknown projection', ['projections', 'rebuild', 'nosuch'], {}, /^switchboard: unknown projection nosuch; known: apikeys, sends, /, 'alone'],
    ['a company id that is not a positive integer', ['companies', 'rate-limit', '--company', 'abc', '--per-minute', '10'], {}, /^error: option '--company <id>' argument 'abc' is invalid\. A positive integer is expected\.$/, 'usage'],
    ['a DATA_DIR that cannot be created', ['keys', 'list'], NO_DATA_DIR, /^switchboard: cannot start: DATA_DIR \/proc\/switchboard-nope cannot be created or written .*; set DATA_DIR to a folder/, 'alone'],
  ])('%s', (_name, args, extra, line, after) => {
    const r = run(args, extra);
    expect(r.status).toBe(1);
    expect(r.lines[0]).toMatch(line);
    expect(r.lines.slice(1).join('\n')).toMatch(after === 'alone' ? /^$/ : /^Usage: switchboard /);
    expect(r.stderr).not.toMatch(STACK_LINE);
    expect(r.stdout).not.toMatch(STACK_LINE);
  });

  it('with LOG_LEVEL=debug the same line comes first, then the whole error', () => {
    const r = run(['keys', 'list'], { ...NO_DATA_DIR, LOG_LEVEL: 'debug' });
    expect(r.status).toBe(1);
    expect(r.lines[0]).toMatch(/^switchboard: cannot start: DATA_DIR \/proc\/switchboard-nope /);
    expect(r.stderr).toMatch(STACK_LINE);
  });
});
