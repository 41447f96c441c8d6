import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createTestDatabase, type TestDatabase, withDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';

// Every start-up failure an operator can cause: `serve` and `worker` (the built CLI) print one line naming the
// cause and the fix on stderr, exit 1, and print a stack trace only with LOG_LEVEL=debug.
const SECRETS = { ANONYMIZATION_SECRET: 'startup-errors-anon', API_KEY_PEPPER: 'startup-errors-pepper' };

type Role = 'serve' | 'worker';

const listening = (port = 0) =>
  new Promise<Server>((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(port, '127.0.0.1', () => ok(s));
  });
const portOf = (s: Server) => (s.address() as { port: number }).port;
const close = (s: Server) => new Promise<void>((ok) => s.close(() => ok()));

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const s = await listening();
  const port = portOf(s);
  await close(s);
  return port;
}

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-startup-'));
  // mkdtemp makes it 0700; as root the embedded Postgres runs as the postgres user, who must reach it
  chmodSync(dir, 0o755);
  dirs.push(dir);
  return dir;
}
const dirs: string[] = [];

function start(role: Role, env: Record<string, string>, as?: { uid: number; gid: number }) {
  const result = spawnSync(process.execPath, [CLI, role], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    encoding: 'utf8',
    timeout: 120_000,
    ...as,
  });
  const stderrLines = result.stderr.split('\n').filter((l) => l.trim() !== '');
  return { status: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr, stderrLines };
}

/** Exit 1, one line on stderr matching every pattern, no stack trace anywhere; returns the line. */
function expectOneLine(run: ReturnType<typeof start>, ...patterns: RegExp[]): string {
  expect({ status: run.status, signal: run.signal, stderrLines: run.stderrLines.length }).toEqual({ status: 1, signal: null, stderrLines: 1 });
  const [line] = run.stderrLines;
  expect(line).toMatch(/^switchboard: cannot start: /);
  for (const p of patterns) expect(line).toMatch(p);
  expect(run.stderr).not.toMatch(STACK_LINE);
  expect(run.stdout).not.toMatch(STACK_LINE);
  return line;
}

/**
 * The port just below the kernel's first unprivileged one, and who runs the CLI: this user, or `nobody` when this
 * is root (root may listen anywhere). Skipped, saying why, where no such port exists or `nobody` cannot run the tree.
 */
const privilegedPort = ((): { port: number; as?: { uid: number; gid: number }; skip?: string } => {
  const file = '/proc/sys/net/ipv4/ip_unprivileged_port_start';
  const first = existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : 1024;
  if (!(first > 1)) return { port: 0, skip: `this kernel lets every user listen on every port (${file} is ${first})` };
  const port = Math.min(first, 1024) - 1;
  if (process.getuid?.() !== 0) return { port };
  const as = { uid: 65534, gid: 65534 };
  const probe = spawnSync(process.execPath, ['-e', `require('fs').accessSync(${JSON.stringify(CLI)}, require('fs').constants.R_OK)`], { ...as, encoding: 'utf8' });
  if (probe.status !== 0) return { port, skip: `running as root, and user nobody cannot read ${CLI} (a private folder above it)` };
  return { port, as };
})();
if (privilegedPort.skip) console.warn(`privileged-port start-up test skipped: ${privilegedPort.skip}`);

/** Runs `body` (which ends the process with an exit code) with `pg` and `url`, the tests' Postgres; its exit code. */
function probePostgres(url: string, body: string): number | null {
  const script = `const url = ${JSON.stringify(url)}; const c = new (require('pg').Client)({ connectionString: url }); ${body}`;
  return spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 }).status;
}

const testPostgres = process.env.TEST_DATABASE_URL;
/** Whether the tests' Postgres refuses a wrong password (a server with `trust` authentication takes any). */
const passwordsChecked = ((): { skip?: string } => {
  if (!testPostgres) return { skip: 'TEST_DATABASE_URL is not set' };
  const wrong = Object.assign(new URL(testPostgres), { password: 'not-the-password' }).toString();
  const code = probePostgres(wrong, `c.connect().then(() => c.end().then(() => process.exit(3)), (e) => process.exit(e.code === '28P01' ? 0 : 4));`);
  return code === 0 ? {} : { skip: `the tests' Postgres does not refuse a wrong password (probe exit ${code}: trust authentication?)` };
})();
/** Whether the tests' Postgres user may create a login role (for a user without the CREATE privilege). */
const rolesCreatable = ((): { skip?: string } => {
  if (!testPostgres) return { skip: 'TEST_DATABASE_URL is not set' };
  const code = probePostgres(testPostgres, `c.connect().then(() => c.query('SELECT rolsuper OR rolcreaterole AS ok FROM pg_roles WHERE rolname = current_user')).then((r) => process.exit(r.rows[0]?.ok ? 0 : 3), () => process.exit(4));`);
  return code === 0 ? {} : { skip: `the tests' Postgres user may not create roles (probe exit ${code})` };
})();
for (const [what, p] of [['wrong-password', passwordsChecked], ['schema-permission', rolesCreatable]] as const) {
  if (p.skip) console.warn(`${what} start-up test skipped: ${p.skip}`);
}

const d = describeWithBuiltCli('start-up errors suite');

d('start-up errors: one line naming the cause and the fix (built CLI)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  describe('port in use', () => {
    let taken: Server;
    beforeAll(async () => {
      taken = await listening();
    });
    afterAll(() => close(taken));

    it('serve: names the port and says to free it or set PORT; the embedded Postgres it started is stopped', () => {
      const dir = dataDir();
      const port = portOf(taken);
      const run = start('serve', { DATA_DIR: dir, PORT: String(port) });
      expectOneLine(run, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use by another process`), /stop that process or set PORT to a free port/);
      expect(existsSync(join(dir, 'pg', 'PG_VERSION'))).toBe(true); // the failure came after Postgres had started
      const orphans = spawnSync('pgrep', ['-f', dir], { encoding: 'utf8' });
      expect(orphans.stdout).toBe('');
      expect(orphans.status).toBe(1); // pgrep: no process matched
    });

    it('serve with LOG_LEVEL=debug: the same line first, then the stack', () => {
      const port = portOf(taken);
      const run = start('serve', { DATABASE_URL: db.url, ...SECRETS, PORT: String(port), LOG_LEVEL: 'debug' });
      expect(run.status).toBe(1);
      expect(run.stderrLines[0]).toBe(
        `switchboard: cannot start: port ${port} on 127.0.0.1 is already in use by another process; stop that process or set PORT to a free port`,
      );
      expect(run.stderr).toMatch(STACK_LINE);
      expect(run.stderr).toContain('EADDRINUSE');
    });

    it("worker: its ops listener's port (WORKER_OPS_PORT) taken: names it and says to set WORKER_OPS_PORT", () => {
      const port = portOf(taken);
      const run = start('worker', { DATABASE_URL: db.url, ...SECRETS, WORKER_OPS_PORT: String(port) });
      expectOneLine(run, new RegExp(`^switchboard: cannot start: port ${port} on 127\\.0\\.0\\.1 is already in use by another process; stop that process or set WORKER_OPS_PORT to a free port$`));
    });
  });

  describe('a privileged port for a user who may not listen on it', () => {
    (privilegedPort.skip ? it.skip : it)(`serve: names the port and says to set PORT to 1024 or above${privilegedPort.skip ? ` (skipped: ${privilegedPort.skip})` : ''}`, () => {
      const port = privilegedPort.port;
      const run = start('serve', { DATABASE_URL: db.url, ...SECRETS, PORT: String(port), HOME: tmpdir() }, privilegedPort.as);
      expectOneLine(run, new RegExp(`this user may not listen on port ${port} \\(below 1024\\)`), /set PORT to 1024 or above$/);
    });
  });

  describe('a setting that is not valid', () => {
    it('worker: WORKER_OPS_PORT that is not a port', () => {
      const run = start('worker', { DATABASE_URL: db.url, ...SECRETS, WORKER_OPS_PORT: 'metrics' });
      expectOneLine(run, /invalid configuration: WORKER_OPS_PORT: a port number from 1 to 65535 \(unset: no listener\); correct those environment variables/);
    });
  });

  describe('unwritable DATA_DIR', () => {
    it('serve: a DATA_DIR below a regular file', () => {
      const file = join(dataDir(), 'a-file');
      writeFileSync(file, '');
      const run = start('serve', { DATA_DIR: join(file, 'data') });
      expectOneLine(
        run,
        new RegExp(`DATA_DIR ${join(file, 'data')} cannot be created or written \\(a part of the path is a file, not a folder\\)`),
        /set DATA_DIR to a folder this user can create and write, or set DATABASE_URL/,
      );
    });

    it('worker: a DATA_DIR the kernel refuses (/proc)', () => {
      const run = start('worker', { DATA_DIR: '/proc/switchboard-data' });
      expectOneLine(run, /DATA_DIR \/proc\/switchboard-data cannot be created or written/, /set DATA_DIR to a folder this user can create and write/);
    });
  });

  describe('the embedded Postgres fails for another reason', () => {
    it('worker: a DATA_DIR whose pg folder is not a whole cluster: the line carries Postgres\'s own reason', () => {
      const dir = dataDir();
      mkdirSync(join(dir, 'pg'));
      writeFileSync(join(dir, 'pg', 'PG_VERSION'), '17\n'); // looks initialised, holds nothing else
      const line = expectOneLine(
        start('worker', { DATA_DIR: dir }),
        new RegExp(`the embedded Postgres in DATA_DIR ${dir} did not start: postgres exited before accepting connections: `),
        /could not access the server configuration file ".*postgresql\.conf": No such file or directory/,
        /see docs\/install\.md \("Running as root", "Start-up errors"\), or set DATABASE_URL/,
      );
      expect(line).not.toContain('undefined');
    });
  });

  describe('bad DATABASE_URL', () => {
    it.each<[Role, string]>([
      ['serve', 'not-a-url'],
      ['worker', 'mysql://u:p@127.0.0.1:3306/db'],
    ])('%s: DATABASE_URL=%s is named as not a postgres URL', (role, url) => {
      const line = expectOneLine(start(role, { DATABASE_URL: url, ...SECRETS }), /correct those environment variables/);
      expect(line).toBe(
        'switchboard: cannot start: invalid configuration: DATABASE_URL: not a postgres:// URL (postgres://user:password@host:5432/database); '
          + 'correct those environment variables and start again',
      );
    });
  });

  describe('Postgres not reachable', () => {
    it.each<Role>(['serve', 'worker'])('%s: names the address, after the bounded wait (STARTUP_WAIT_S)', async (role) => {
      const port = await closedPort();
      const run = start(role, { DATABASE_URL: `postgres://u:secret-pw@127.0.0.1:${port}/db`, ...SECRETS, STARTUP_WAIT_S: '1' });
      const line = expectOneLine(
        run,
        new RegExp(`Postgres at 127\\.0\\.0\\.1:${port}/db is not reachable \\(connection refused; retried for 1 s\\)`),
        /start Postgres or correct the host and port in DATABASE_URL/,
      );
      expect(line).not.toContain('secret-pw');
    });
  });

  describe('Postgres answers but refuses, or cannot be found (not retried)', () => {
    it('serve: a database that does not exist', () => {
      const run = start('serve', { DATABASE_URL: withDatabase(db.url, 'switchboard_no_such_db'), ...SECRETS });
      expectOneLine(run, /: database "switchboard_no_such_db" does not exist; create that database, or correct its name in DATABASE_URL$/);
    });

    it('serve: a host that does not resolve', () => {
      const url = Object.assign(new URL(db.url), { hostname: 'switchboard-no-such-host.invalid' }).toString();
      const run = start('serve', { DATABASE_URL: url, ...SECRETS });
      expectOneLine(run, /the host of DATABASE_URL \(switchboard-no-such-host\.invalid:\d+\/[^)]+\) does not resolve; correct the host in DATABASE_URL$/);
    });

    (passwordsChecked.skip ? it.skip : it)(`serve: a wrong password${passwordsChecked.skip ? ` (skipped: ${passwordsChecked.skip})` : ''}`, () => {
      const url = Object.assign(new URL(db.url), { password: 'not-the-password' }).toString();
      const line = expectOneLine(start('serve', { DATABASE_URL: url, ...SECRETS }), /refused the login \(.+\); correct the user and password in DATABASE_URL$/);
      expect(line).not.toContain('not-the-password');
    });

    (rolesCreatable.skip ? it.skip : it)(`serve: a user who may not create the schema${rolesCreatable.skip ? ` (skipped: ${rolesCreatable.skip})` : ''}`, async () => {
      const role = `sb_noperm_${process.pid}`;
      await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD 'noperm-pw'`);
      try {
        const url = Object.assign(new URL(db.url), { username: role, password: 'noperm-pw' }).toString();
        expectOneLine(start('serve', { DATABASE_URL: url, ...SECRETS }), /the user of DATABASE_URL may not create the schema \(.+\); grant that user CREATE on the database, or use the database's owner$/);
      } finally {
        await db.pool.query(`DROP ROLE ${role}`);
      }
    });
  });

  describe('HOST not an address of this machine', () => {
    it('serve: names HOST and the addresses to use (192.0.2.1 is a documentation address, never assigned)', () => {
      const run = start('serve', { DATABASE_URL: db.url, ...SECRETS, HOST: '192.0.2.1', PORT: '0' });
      expectOneLine(run, /HOST 192\.0\.2\.1 is not an address of this machine; set HOST to one of its addresses/);
    });
  });

  describe('Kafka brokers unreachable', () => {
    it.each<Role>(['serve', 'worker'])('%s: names the brokers, after the bounded wait (STARTUP_WAIT_S)', async (role) => {
      const port = await closedPort();
      const run = start(role, { DATABASE_URL: db.url, ...SECRETS, KAFKA_BROKERS: `127.0.0.1:${port}`, STARTUP_WAIT_S: '1' });
      expectOneLine(
        run,
        new RegExp(`the Kafka brokers 127\\.0\\.0\\.1:${port} did not answer within 1 s`),
        /start Kafka or correct KAFKA_BROKERS/,
      );
    });
  });

  describe('invalid configuration', () => {
    it.each<Role>(['serve', 'worker'])('%s: every invalid variable on the one line', (role) => {
      const line = expectOneLine(start(role, { PORT: 'abc', LOG_LEVEL: 'loud' }), /correct those environment variables and start again$/);
      expect(line).toMatch(/^switchboard: cannot start: invalid configuration: PORT: [^;]+; LOG_LEVEL: [^;]+; correct/);
    });
  });
});
