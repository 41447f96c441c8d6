// Regression review 5 (2026-11-27): `seed FILE` opens FILE through openInputFile, which first refused anything but a
// regular file; `readFileSync(FILE)` had read any readable path, so a fixture piped in (`... | switchboard seed
// /dev/stdin`, or `switchboard seed <(generate)`) was seeded, and is again (openInputFile's `pipes`).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT } from '../support/e2e-server';
import { exampleFixture } from '../support/provisioning';

jest.setTimeout(120_000);

const d = describeWithBuiltCli('regress-review5 seed from a pipe');

d('seed from a pipe (built CLI)', () => {
  let db: TestDatabase;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'regress-review5-'));
  });
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('seeds a fixture given on stdin as /dev/stdin', () => {
    const env = e2eServerEnv({ dataDir: join(dir, 'data'), port: '0', databaseUrl: db.url, logLevel: 'warn' });
    const fixture = join(dir, 'fixture.json');
    writeFileSync(fixture, JSON.stringify(exampleFixture()));
    // a shell pipe, as an operator's (spawn's own stdin is a socket, which /dev/stdin cannot open)
    const r = spawnSync('sh', ['-c', 'cat "$0" | "$1" "$2" seed /dev/stdin', fixture, process.execPath, CLI], {
      cwd: ROOT, env, encoding: 'utf8', timeout: 90_000,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  // Before, import-messages stat'ed the path and refused a FIFO at once ("not a file"); open() on a FIFO waits for
  // a writer, so with none the command never answers (killed here by spawnSync's timeout).
  it('refuses a FIFO with no writer to import-messages instead of waiting for one', () => {
    const env = e2eServerEnv({ dataDir: join(dir, 'data'), port: '0', databaseUrl: db.url, logLevel: 'warn' });
    const fifo = join(dir, 'messages.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const r = spawnSync(process.execPath, [CLI, 'import-messages', fifo], { cwd: ROOT, env, encoding: 'utf8', timeout: 20_000 });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 1, stderr: expect.stringContaining(`cannot read ${fifo}: not a`) });
  });
});
