import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, freePort, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';
import { countEvents, EXAMPLE, exampleFixture } from '../support/provisioning';

// Operator paths of the built CLI, found in review: a fixture whose values pass validation but that Postgres cannot
// hold, ids past Postgres `integer` on the command line, an impossible --expires day, a misspelt --type, an export
// whose reader goes away or whose disk is full, and variables set to nothing.

const SECRETS = { ANONYMIZATION_SECRET: 'review-cli-anonymization-secret', API_KEY_PEPPER: 'review-cli-api-key-pepper' };

const d = describeWithBuiltCli('review CLI operator suite');

d('review: CLI operator paths (built CLI, test database)', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'review-cli-'));
    env = { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, ...SECRETS, DATA_DIR: join(dir, 'data'), PORT: String(await freePort()) };
    const seeded = run(['seed', file('example', exampleFixture({ keepContacts: true }))]);
    expect(seeded.status).toBe(0);
  });
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function run(args: string[], extra: NodeJS.ProcessEnv = {}, stdout: 'pipe' | number = 'pipe') {
    const r = spawnSync(process.execPath, [CLI, ...args], {
      cwd: ROOT, env: { ...env, ...extra }, encoding: 'utf8', timeout: 60_000, stdio: ['ignore', stdout, 'pipe'],
    });
    return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr, lines: r.stderr.split('\n').filter((l) => l.trim() !== '') };
  }

  function file(name: string, doc: unknown): string {
    const path = join(dir, `${name}.json`);
    writeFileSync(path, JSON.stringify(doc));
    return path;
  }

  const noStack = (r: ReturnType<typeof run>) => {
    expect(r.stderr).not.toMatch(STACK_LINE);
    expect(r.stdout).not.toMatch(STACK_LINE);
  };

  describe('seed: a value Postgres cannot hold is a fixture mistake, rejected by path with nothing appended', () => {
    it.each<[string, (doc: any) => void, string]>([
      ['a holiday id over 2147483647', (doc) => (doc.companies[0].holidays[0].id = 2_147_483_648), 'companies[0].holidays[0].id'],
      ['a company id over 2147483647', (doc) => (doc.companies[0].id = 3_000_000_000), 'companies[0].id'],
      ['a holiday in year 0', (doc) => (doc.companies[0].holidays[0].date = '0000-01-01'), 'companies[0].holidays[0].date'],
      ['a contact created in year 0', (doc) => (doc.companies[0].contacts[0].createdAt = '0000-06-01T00:00:00Z'), 'companies[0].contacts[0].createdAt'],
      ['a key expiring in year 0', (doc) => (doc.globalKeys[0].expiresAt = '0000-06-01T00:00:00Z'), 'globalKeys[0].expiresAt'],
      ['a NUL character in a name', (doc) => (doc.companies[0].name = 'Clinica\u0000Norte'), 'companies[0].name'],
    ])('%s', async (_name, mistake, path) => {
      const doc = exampleFixture({ keepContacts: true });
      mistake(doc);
      const before = await countEvents(db.pool);
      const r = run(['seed', file('mistake', doc)]);
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`  ${path}: `);
      expect(r.lines.at(-1)).toBe('nothing was appended');
      noStack(r);
      expect(await countEvents(db.pool)).toBe(before);
      // every projection still applies the log: a later seed (which waits for them) goes through
      const failing = await db.pool.query("SELECT name, error FROM projections.checkpoints WHERE state = 'failing'");
      expect(failing.rows).toEqual([]);
      const again = run(['seed', file('example', exampleFixture({ keepContacts: true }))]);
      expect({ status: again.status, stderr: again.stderr }).toEqual({ status: 0, stderr: '' });
      expect(again.stdout).toMatch(/appended 0 events/);
    });
  });

  it.each([
    ['keys issue --company', ['keys', 'issue', '--company', '2147483648', '--name', 'x']],
    ['keys issue --user', ['keys', 'issue', '--company', String(EXAMPLE.companyId), '--user', '2147483648', '--name', 'x']],
    ['keys list --company', ['keys', 'list', '--company', '99999999999999999999']],
    ['companies rate-limit --company', ['companies', 'rate-limit', '--company', '2147483648', '--per-minute', '5']],
  ])('%s past Postgres integer: the option is refused in one line, no stack trace', (_name, args) => {
    const r = run(args);
    expect(r.status).toBe(1);
    expect(r.lines[0]).toMatch(/^error: option '--(company|user) <id>' argument '\d+' is invalid\. An id from 1 to 2147483647 is expected\.$/);
    noStack(r);
  });

  it('keys issue --expires on a day the calendar does not have is refused, not moved to another day', () => {
    const r = run(['keys', 'issue', '--company', String(EXAMPLE.companyId), '--name', 'leap', '--expires', '2099-02-30']);
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 1, stdout: '' });
    expect(r.lines).toEqual(['switchboard: --expires must be an ISO 8601 date-time, got "2099-02-30"']);
    expect(run(['keys', 'list', '--json']).stdout).not.toContain('"leap"');
  });

  it('events export --type with a misspelt type is one line naming it, not an empty export', () => {
    const r = run(['events', 'export', '--type', 'CompanyRegistered,CompanyRegisterd']);
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 1, stdout: '' });
    expect(r.lines).toEqual(['switchboard: --type: unknown event type CompanyRegisterd (`switchboard events schemas` lists them)']);
  });

  it('events export whose reader goes away (`| head`) ends quietly with status 0', async () => {
    const child = spawn(process.execPath, [CLI, 'events', 'export'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy(); // the reader is gone before the first line
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const status = await new Promise<number | null>((ok) => child.on('close', (code) => ok(code)));
    expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
  });

  it('events export to a full disk is one line naming it, status 1', () => {
    const full = openSync('/dev/full', 'w');
    try {
      const r = run(['events', 'export'], {}, full);
      expect(r.status).toBe(1);
      expect(r.lines).toEqual([
        'switchboard: cannot write the export (ENOSPC); the output may end with a partial line: resume with --from the position of its last complete line',
      ]);
    } finally {
      closeSync(full);
    }
  });

  it('a variable set to nothing is its default (compose `${VAR:-}`, an env file `VAR=`)', () => {
    const r = run(['companies', 'rate-limits'], { RATE_LIMIT_PER_MINUTE: '', LOG_LEVEL: ' ', STARTUP_WAIT_S: '' });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(/^default: 60000 requests per minute per API key\n/);
  });

  // docs/install.md: one-shot commands fail the same way as serve (the line names the fix)
  it('a one-shot command names the fix of an invalid variable, as serve does', () => {
    const r = run(['keys', 'list'], { PORT: 'abc' });
    expect(r.status).toBe(1);
    expect(r.lines).toEqual([
      'switchboard: cannot start: invalid configuration: PORT: a port number from 0 to 65535 (0: any free port); correct those environment variables and start again',
    ]);
  });
});
