import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI as CLI, describeWithBuiltCli, STACK_LINE } from '../support/e2e-server';

// DATA_DIR/embedded-postgres.json (the embedded Postgres's port, password and owner) is replaced atomically: written
// in place, a command killed between the truncation and the write left it empty (seen in CI, a test killing a
// command with SIGKILL under load), and every later start failed on `JSON.parse` with a stack trace.

const d = describeWithBuiltCli('embedded state file suite');

d('the embedded Postgres state file', () => {
  let dataDir: string;
  const cli = (...args: string[]) =>
    spawnSync(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir }, encoding: 'utf8', timeout: 120_000 });

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-state-file-'));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it('is written by a rename (no temporary file left) and read by the next command', () => {
    expect(cli('projections', 'status').status).toBe(0);
    expect(readdirSync(dataDir).filter((f) => f.startsWith('embedded-postgres.json'))).toEqual(['embedded-postgres.json']);
    expect(cli('projections', 'status').status).toBe(0);
  }, 180_000);

  it.each([['empty', ''], ['not the JSON this service writes', '{"port": "x"']])('%s: one line naming the file and what to do, exit 1', (what, content) => {
    writeFileSync(join(dataDir, 'embedded-postgres.json'), content);
    const r = cli('projections', 'status');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`${join(dataDir, 'embedded-postgres.json')} is damaged (${what}): it holds the embedded Postgres's port and password;`);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).not.toMatch(STACK_LINE);
  }, 60_000);
});
