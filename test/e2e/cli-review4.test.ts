import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';
import { EXAMPLE, exampleFixture } from '../support/provisioning';

// Found in review (built CLI): user errors had three prefixes (`companies rate-limit: ...`, `keys: ...`,
// `switchboard: ...`); `seed` of a missing file printed Node's error (`ENOENT: no such file or directory, open ...`),
// `import-messages` of a file this user may not read died with an unhandled 'error' event and its stack, and of an
// empty file said `recorded 0` with status 0; there was no `--version`; `projections status` showed the code's
// version only, so a pending version-change rebuild showed with `--json` alone; RATE_LIMIT_PER_MINUTE and the export
// limits had no upper bound (EXPORT_MAX_CONCURRENT is the export pool's size); the help gave the contracts' folder
// two ways; a fixture saved with a byte-order mark was "not JSON". Every user error is now `switchboard: <what is wrong>[; <the fix>]`, status 1 (docs/install.md).

const d = describeWithBuiltCli('CLI review 4 suite');

const FIXTURE_HELP = 'a fixture is one JSON document (format: ../shared/contracts/fixture.md; example: ../shared/contracts/example-fixture.json)';

d('operator CLI, review 4 (built CLI)', () => {
  let db: TestDatabase;
  let dir: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'cli-review4-'));
    chmodSync(dir, 0o755); // the unreadable-file cases run as `nobody` when this is root
    env = e2eServerEnv({ dataDir: join(dir, 'data'), port: '0', databaseUrl: db.url, logLevel: 'warn' });
  });
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function run(args: string[], extra: NodeJS.ProcessEnv = {}, as: { uid: number; gid: number } | {} = {}) {
    const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...env, ...extra }, encoding: 'utf8', timeout: 60_000, ...as });
    expect(r.stderr).not.toMatch(STACK_LINE);
    expect(r.stdout).not.toMatch(STACK_LINE);
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, lines: r.stderr.split('\n').filter((l) => l.trim() !== '') };
  }

  /** The one line of a user error, and its status. */
  const failure = (r: ReturnType<typeof run>) => ({ status: r.status, lines: r.lines, stdout: r.stdout });
  const oneLine = (line: string) => ({ status: 1, lines: [line], stdout: '' });

  function file(name: string, content: string): string {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  }

  describe('every user error is `switchboard: ...`, one line, status 1', () => {
    beforeAll(() => {
      expect(run(['seed', file('example.json', JSON.stringify(exampleFixture()))]).status).toBe(0);
    });

    it('companies rate-limit without --per-minute or --default', () => {
      expect(failure(run(['companies', 'rate-limit', '--company', String(EXAMPLE.companyId)]))).toEqual(
        oneLine('switchboard: companies rate-limit takes exactly one of --per-minute <n> and --default'),
      );
      expect(failure(run(['companies', 'rate-limit', '--company', String(EXAMPLE.companyId), '--per-minute', '5', '--default']))).toEqual(
        oneLine('switchboard: companies rate-limit takes exactly one of --per-minute <n> and --default'),
      );
    });

    it('a broken rule: keys revoke of an unknown key, a limit past the largest', () => {
      expect(failure(run(['keys', 'revoke', 'no-such-key']))).toEqual(oneLine('switchboard: no API key no-such-key; `switchboard keys list` shows the key ids'));
      expect(failure(run(['companies', 'rate-limit', '--company', String(EXAMPLE.companyId), '--per-minute', '1000000001']))).toEqual(
        oneLine('switchboard: the limit must be a whole number of requests per minute from 1 to 1000000000, got 1000000001'),
      );
    });

    it('an invalid fixture: the problems under the first line, one a line, then that nothing was appended', () => {
      const doc = exampleFixture();
      doc.companies[0].timezone = 'Mars/Olympus';
      const r = run(['seed', file('invalid.json', JSON.stringify(doc))]);
      expect(r.status).toBe(1);
      expect(r.lines[0]).toBe('switchboard: invalid fixture (1 problem):');
      expect(r.lines[1]).toMatch(/^ {2}companies\[0\]\.timezone: /);
      expect(r.lines.slice(2)).toEqual(['nothing was appended']);
    });
  });

  describe('seed FILE that cannot be used: what is wrong with it, and what a fixture is', () => {
    it('a missing file', () => {
      expect(failure(run(['seed', join(dir, 'nope.json')]))).toEqual(oneLine(`switchboard: cannot read ${join(dir, 'nope.json')}: no such file; ${FIXTURE_HELP}`));
    });

    it('a folder', () => {
      expect(failure(run(['seed', dir]))).toEqual(oneLine(`switchboard: cannot read ${dir}: a folder, not a file; ${FIXTURE_HELP}`));
    });

    it('an empty file', () => {
      const path = file('empty.json', '');
      expect(failure(run(['seed', path]))).toEqual(oneLine(`switchboard: ${path} is empty: no fixture in it; ${FIXTURE_HELP}`));
    });

    it('a file that is not JSON', () => {
      const path = file('broken.json', '{"companies": [');
      expect(failure(run(['seed', path]))).toEqual(oneLine(`switchboard: ${path} is not JSON (Unexpected end of JSON input); ${FIXTURE_HELP}`));
    });

    it('a fixture saved with a UTF-8 byte-order mark is read, as import-messages reads one', () => {
      const r = run(['seed', file('bom.json', `\ufeff${JSON.stringify(exampleFixture())}`)]);
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      expect(r.stdout).toMatch(/^seeded \d+ compan(y|ies): appended 0 events/);
    });

    it('the fixture paths the line names exist, next to the project', () => {
      for (const path of ['../shared/contracts/fixture.md', '../shared/contracts/example-fixture.json']) expect(existsSync(join(ROOT, path))).toBe(true);
    });
  });

  describe('import-messages FILE that cannot be used', () => {
    it('a folder', () => {
      expect(failure(run(['import-messages', dir]))).toEqual(oneLine(`switchboard: cannot read ${dir}: a folder, not a file`));
    });

    it('an empty file is refused, not an import of nothing', () => {
      const path = file('empty.ndjson', '');
      expect(failure(run(['import-messages', path]))).toEqual(oneLine(`switchboard: ${path} is empty: no message records to import`));
    });
  });

  describe('a file this user may not read (as `nobody` when the tests run as root)', () => {
    const asRoot = process.getuid?.() === 0;
    const as = asRoot ? { uid: 65534, gid: 65534 } : {};
    const unreadable = (name: string) => {
      const path = file(name, '{}\n');
      chmodSync(path, 0o000);
      return path;
    };
    // a DATA_DIR that user may write, so that a start gets as far as reading the file (as it did before the fix)
    const nobodyEnv = () => {
      const data = join(dir, 'data-any-user');
      mkdirSync(data, { recursive: true });
      chmodSync(data, 0o777);
      return { DATA_DIR: data };
    };

    it('seed', () => {
      const path = unreadable('secret.json');
      expect(failure(run(['seed', path], nobodyEnv(), as))).toEqual(
        oneLine(`switchboard: cannot read ${path}: permission denied (this user may not read it); ${FIXTURE_HELP}`),
      );
    });

    it('import-messages', () => {
      const path = unreadable('secret.ndjson');
      expect(failure(run(['import-messages', path], nobodyEnv(), as))).toEqual(
        oneLine(`switchboard: cannot read ${path}: permission denied (this user may not read it)`),
      );
    });
  });

  describe('the command itself', () => {
    it('--version and -V print the version of package.json on stdout', () => {
      const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
      for (const flag of ['--version', '-V']) {
        const r = run([flag]);
        expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 0, stdout: `${version}\n`, stderr: '' });
      }
    });

    it('no command: the help on stderr, status 1, as for any other mistake in the arguments; --help: stdout, 0', () => {
      const none = run([]);
      expect({ status: none.status, stdout: none.stdout }).toEqual({ status: 1, stdout: '' });
      expect(none.stderr).toMatch(/^Usage: switchboard \[options\] \[command\]\n/);
      expect(none.stderr).toMatch(/^ {2}-V, --version +print the version$/m);
      const help = run(['--help']);
      expect({ status: help.status, stdout: help.stdout, stderr: help.stderr }).toEqual({ status: 0, stdout: none.stderr, stderr: '' });
    });

    it('the help gives the contracts in one form, ../shared/contracts/, and they exist', () => {
      const texts = [run(['--help']).stdout, run(['seed', '--help']).stdout, run(['import-messages', '--help']).stdout].join('\n').replace(/\s*\n\s*/g, ' ');
      const named = [...texts.matchAll(/\(?(\S*contracts\/[\w.-]+)/g)].map((m) => m[1].replace(/^\(/, ''));
      expect(named).toEqual(expect.arrayContaining(['../shared/contracts/fixture.md', '../shared/contracts/conversation-messages.md']));
      for (const path of named) {
        expect(path).toMatch(/^\.\.\/shared\/contracts\//);
        expect(existsSync(join(ROOT, path))).toBe(true);
      }
    });
  });

  describe('limits of the environment', () => {
    it.each([
      ['RATE_LIMIT_PER_MINUTE', '1000000001', 'a whole number from 1 to 1000000000, in decimal digits'],
      ['EXPORT_MAX_CONCURRENT', '100000', 'a whole number from 1 to 100, in decimal digits'],
      ['EXPORT_MAX_PER_KEY', '101', 'a whole number from 1 to 100, in decimal digits'],
    ])('%s=%s is refused in the one start-up line', (name, value, expected) => {
      expect(failure(run(['keys', 'list'], { [name]: value }))).toEqual(
        oneLine(`switchboard: cannot start: invalid configuration: ${name}: ${expected}; correct those environment variables and start again`),
      );
    });

    it('the largest values start', () => {
      const r = run(['companies', 'rate-limits'], { RATE_LIMIT_PER_MINUTE: '1000000000', EXPORT_MAX_CONCURRENT: '100', EXPORT_MAX_PER_KEY: '100' });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      expect(r.stdout).toMatch(/^default: 1000000000 requests per minute per API key\n/);
    });
  });

  describe('projections status', () => {
    it('the table shows the stored version beside the code\'s when they differ (a version change not yet rebuilt)', async () => {
      const before = run(['projections', 'status']);
      expect(before.status).toBe(0);
      const code = (await db.pool.query<{ version: number }>(`SELECT version FROM projections.checkpoints WHERE name = 'ratelimits'`)).rows[0].version;
      expect(before.stdout).toMatch(new RegExp(`^ratelimits +${code} +\\S`, 'm'));
      await db.pool.query(`UPDATE projections.checkpoints SET version = version - 1 WHERE name = 'ratelimits'`);
      try {
        const r = run(['projections', 'status']);
        expect(r.status).toBe(0);
        expect(r.stdout).toMatch(new RegExp(`^ratelimits +${code} \\(stored ${code - 1}\\) +\\S`, 'm'));
        expect(r.stdout).toMatch(/^projection +version +position/);
        // the others keep their one version; every row's position starts under the header's
        const [header, ...rows] = r.stdout.trimEnd().split('\n');
        expect(rows.find((l) => l.startsWith('apikeys '))).toMatch(/^apikeys +\d+ +\S/);
        const at = header.indexOf('position');
        for (const row of rows) expect(row.slice(at - 1, at + 1)).toMatch(/^ \S$/);
      } finally {
        await db.pool.query(`UPDATE projections.checkpoints SET version = version + 1 WHERE name = 'ratelimits'`);
      }
    });
  });
});
