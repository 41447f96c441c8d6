import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { type CliProcess, startCli } from '../support/cli-process';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';
import { isRunning as running, postmasterPidOf, untilStopped } from '../support/embedded-process';
import { EXAMPLE, exampleFixture } from '../support/provisioning';

// Found in review 6 (built CLI, embedded default, real signals to the node process only): a one-shot command had no
// stop-signal listener, so SIGTERM or SIGINT (`kill <pid>`) during `import-messages` or `projections rebuild` killed
// it by the default action: exit by signal, no line, and its embedded Postgres left running, orphaned, with no owner
// to ever stop it (the next command on that DATA_DIR shares it). Now the command says it was interrupted and what it
// left, stops what it started, and exits 143 (SIGTERM) or 130 (SIGINT); a second signal, or a stop stuck past 10 s,
// exits at once, the exit hook still stopping the embedded Postgres. Found alongside: `import-messages` with a
// rejected line exited 0 on the embedded default (its status was set after the runtime stopped, and the embedded
// Postgres's exit hook ends the process with 0 on beforeExit), though the contract says non-zero.

const TIMEOUT = 180_000;
const MESSAGES = 1500;
const RATE_LIMIT_EVENTS = 60_000;
const COMPANY = EXAMPLE.companyId;

/**
 * A statement on DATA_DIR's embedded Postgres while no command runs: a process of its own starts it (as the CLI
 * does: the built adapter), runs the statement, prints the rows as JSON and stops it.
 */
const ON_DATABASE = `
const { startEmbeddedPostgres } = require(${JSON.stringify(join(ROOT, 'dist/adapters/postgres/embedded.js'))});
const { Client } = require('pg');
(async () => {
  const [dataDir, sql, params] = process.argv.slice(1);
  const pg = await startEmbeddedPostgres(dataDir);
  const db = new Client({ connectionString: pg.url });
  try {
    await db.connect();
    process.stdout.write(JSON.stringify((await db.query(sql, JSON.parse(params))).rows));
  } finally {
    await db.end();
    await pg.stop();
  }
})().catch((err) => { process.stderr.write(String(err.stack)); process.exit(1); });
`;

const IMPORT_LEFT = 'the messages recorded so far stay recorded: import the same file again to record the rest (a message already recorded is unchanged)';
const REBUILD_LEFT = 'the rebuild stops before its swap: the live tables serve as before and its partial tables (rm_ratelimits__next) are '
  + 'dropped (if this stop is cut short, by the next start of `serve` or `worker`); run `switchboard projections rebuild ratelimits` again';

const d = describeWithBuiltCli('one-shot CLI signals suite');

d('one-shot commands: SIGTERM and SIGINT (built CLI, embedded default)', () => {
  let dir: string;
  let dataDir: string;
  let started: CliProcess | undefined;

  const env = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, LOG_LEVEL: 'warn' });

  /**
   * A bound that ran out says so (`error`: spawnSync ETIMEDOUT): spawnSync closes its pipes and sends SIGTERM, so the
   * command's output is lost whatever it writes; read as status and output alone, it was "exit 1, nothing printed"
   * (the command's interruption line met a closed stderr: src/cli/stderr-gone.ts). Seen under load (14 on 2 cores).
   */
  const cli = (args: string[]) => {
    const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, env: env(), encoding: 'utf8', timeout: 120_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, ...(r.error ? { error: `${r.error.message} (signal ${r.signal})` } : {}) };
  };

  const start = (args: string[]) => (started = startCli(args, env(), { cwd: ROOT }));

  const state = () => JSON.parse(readFileSync(join(dataDir, 'embedded-postgres.json'), 'utf8')) as { port: number; password: string; databaseDir?: string };

  const postmasterPid = () => postmasterPidOf(dataDir);
  const postgresStopped = (pid: number) => untilStopped(pid);

  /** A connection to the Postgres the command started (never to be stopped by this test). */
  const connectToCommandsPostgres = async (): Promise<Client> => {
    const { port, password } = state();
    const client = new Client({ connectionString: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/switchboard` });
    client.on('error', () => undefined); // ended by the command's stop
    await client.connect();
    return client;
  };

  /** Until `ready` answers true on the command's Postgres (it is up once the pid file is and it answers). */
  async function until(command: CliProcess, ready: (db: Client) => Promise<boolean>): Promise<Client> {
    for (;;) {
      if (command.child.exitCode !== null) throw new Error(`the command ended (${command.child.exitCode}) too early: ${command.stderr()}`);
      const db = postmasterPid() === undefined ? undefined : await connectToCommandsPostgres().catch(() => undefined);
      if (db && (await ready(db).catch(() => false))) return db;
      await db?.end();
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** The rows of `sql` on DATA_DIR's Postgres, started (and stopped) for it while no command runs. */
  const onDatabase = <R>(sql: string, params: unknown[] = []): R[] => {
    const r = spawnSync(process.execPath, ['-e', ON_DATABASE, dataDir, sql, JSON.stringify(params)], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    if (r.status !== 0) throw new Error(`the statement failed: ${r.stderr}`);
    return JSON.parse(r.stdout) as R[];
  };
  const countOf = (sql: string, params: unknown[] = []) => onDatabase<{ n: number }>(sql, params)[0].n;

  const messagesFile = (name: string, prefix: string): string => {
    const lines = Array.from({ length: MESSAGES }, (_, i) => JSON.stringify({
      id: `${prefix}-${i}`, companyId: COMPANY, conversationId: `${prefix}-conv-${i % 300}`,
      occurredAt: new Date(Date.UTC(2024, 0, 10) + i * 1000).toISOString(), channel: 'PROVIDER_MSGAPP', direction: 'inbound',
      author: { type: 'contact', contactId: 1 + (i % 300) }, contactPhone: `+5491110${String(i % 300).padStart(6, '0')}`,
      content: { type: 'text', text: 'hello', mediaUrl: null, mediaMime: null }, replyToMessageId: null,
      classifications: [], extractions: [], toolCalls: [], traceId: null, deleted: false,
    }));
    const path = join(dir, name);
    writeFileSync(path, `${lines.join('\n')}\n`);
    return path;
  };

  const MESSAGE_EVENTS = `SELECT count(*)::int AS n FROM es.events WHERE data->>'messageId' LIKE $1`;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cli-signals-review6-'));
    dataDir = join(dir, 'data');
    const fixture = join(dir, 'example.json');
    writeFileSync(fixture, JSON.stringify(exampleFixture()));
    const seeded = cli(['seed', fixture]);
    expect({ status: seeded.status, stderr: seeded.stderr }).toEqual({ status: 0, stderr: '' });
  }, TIMEOUT);

  afterEach(async () => {
    await started?.kill();
    const pid = existsSync(join(dataDir, 'embedded-postgres.json')) ? postmasterPid() : undefined;
    if (pid && running(pid)) {
      process.kill(pid, 'SIGINT'); // what the failing version left behind
      await postgresStopped(pid);
    }
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each([['SIGTERM', 143], ['SIGINT', 130]] as const)(
    'import-messages, %s mid-import: one line, exit %i, the embedded Postgres stopped; importing again records the rest',
    async (signal, code) => {
      const prefix = `sig-${signal.toLowerCase()}`;
      const file = messagesFile(`${prefix}.ndjson`, prefix);
      const command = start(['import-messages', file]);
      // some of the file recorded, not all of it
      const db = await until(command, async (c) => (await c.query<{ n: number }>(MESSAGE_EVENTS, [`${prefix}-%`])).rows[0].n > 0);
      await db.end();
      const pid = postmasterPid()!;
      command.child.kill(signal);

      const exit = await command.exited;
      expect({ exit, stderr: command.stderr(), stdout: command.stdout(), postgresStopped: await postgresStopped(pid) }).toEqual({
        exit: { code, signal: null }, stderr: `switchboard: interrupted by ${signal}; ${IMPORT_LEFT}\n`, stdout: '', postgresStopped: true,
      });

      const recordedBefore = countOf(MESSAGE_EVENTS, [`${prefix}-%`]);
      expect(recordedBefore).toBeGreaterThan(0);
      expect(recordedBefore).toBeLessThan(MESSAGES);

      const again = cli(['import-messages', file]);
      expect({ status: again.status, stderr: again.stderr }).toEqual({ status: 0, stderr: '' });
      expect(again.stdout).toBe(`recorded ${MESSAGES - recordedBefore}, unchanged ${recordedBefore}, rejected 0\n`);
      expect(countOf('SELECT count(*)::int AS n FROM rm_conversations.messages WHERE message_id LIKE $1', [`${prefix}-%`])).toBe(MESSAGES);
    },
    TIMEOUT,
  );

  it('import-messages with a rejected line exits 1 on the embedded default too (the exit hook made it 0)', () => {
    const file = join(dir, 'one-rejected.ndjson');
    writeFileSync(file, `${JSON.stringify({ id: 'rejected-1', companyId: COMPANY })}\n`);
    const r = cli(['import-messages', file]);
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 1, stdout: 'recorded 0, unchanged 0, rejected 1\n' });
    expect(r.stderr).toMatch(/^line 1: rejected: conversationId: /);
  }, TIMEOUT);

  describe('projections rebuild', () => {
    beforeAll(() => {
      // a log long enough for the replay to take a while: the limits of 500 companies (not the example's) set many times over
      onDatabase(
        `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
         SELECT 'company-' || (g % 500 + 1001), g / 500, e.id, 'CompanyRateLimitSet',
                jsonb_build_object('companyId', g % 500 + 1001, 'perMinute', 100 + g % 7),
                jsonb_build_object('eventId', e.id, 'correlationId', e.id, 'causationId', null, 'companyId', g % 500 + 1001,
                                   'actor', 'cli', 'at', '2026-11-27T10:00:00.000Z')
           FROM generate_series(0, $1 - 1) g, LATERAL (SELECT md5('review6-rate-limit-' || g)::uuid AS id) e`,
        [RATE_LIMIT_EVENTS],
      );
      const status = cli(['projections', 'status']);
      expect({ status: status.status, stderr: status.stderr }).toEqual({ status: 0, stderr: '' });
    }, TIMEOUT);

    const NEXT_SCHEMA = `SELECT oid::bigint::text AS oid FROM pg_namespace WHERE nspname = 'rm_ratelimits__next'`;

    /** Starts a rebuild; resolves once it replays into fresh tables of its own (not those an earlier one left). */
    async function replayingRebuild() {
      const leftover = onDatabase<{ oid: string }>(NEXT_SCHEMA)[0]?.oid;
      const command = start(['projections', 'rebuild', 'ratelimits']);
      const db = await until(command, async (c) => {
        const schema = (await c.query<{ oid: string }>(NEXT_SCHEMA)).rows[0]?.oid;
        const n = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM rm_ratelimits__next.company_limits').then((r) => r.rows[0].n, () => 0);
        const cp = await c.query<{ state: string }>(`SELECT state FROM projections.checkpoints WHERE name = 'ratelimits'`);
        return schema !== undefined && schema !== leftover && n > 0 && cp.rows[0]?.state === 'rebuilding';
      });
      return { command, db };
    }

    const ratelimitsStatus = () => {
      const r = cli(['projections', 'status', '--json']);
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      return r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { name: string; state: string }).find((row) => row.name === 'ratelimits')!;
    };

    it('SIGTERM mid-replay: one line naming what is left, exit 143, Postgres stopped; status and the rebuild again work', async () => {
      const { command, db } = await replayingRebuild();
      await db.end();
      const pid = postmasterPid()!;
      command.child.kill('SIGTERM');

      const exit = await command.exited;
      expect({ exit, stderr: command.stderr(), postgresStopped: await postgresStopped(pid) }).toEqual({
        exit: { code: 143, signal: null }, stderr: `switchboard: interrupted by SIGTERM; ${REBUILD_LEFT}\n`, postgresStopped: true,
      });

      // the stop ended the rebuild, which dropped its partial tables through its guard's connection (since 81a9994;
      // before, its clean-up went through the closing pool and failed: 'rebuild interrupted', tables left)
      expect(ratelimitsStatus()).toMatchObject({ state: 'running' });
      expect(countOf(`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'rm_ratelimits__next'`)).toBe(0);
      const again = cli(['projections', 'rebuild', 'ratelimits']);
      // stdout and stderr both: a failure's only trace may be in either (the process's logger writes to stderr since 2026-11-28)
      expect({ status: again.status, stderr: again.stderr, stdout: again.stdout, error: again.error }).toEqual({ status: 0, stderr: '', stdout: expect.stringMatching(/^rebuilt ratelimits v1: /) });
      expect(again.stdout).toMatch(/^rebuilt ratelimits v1: /);
      expect(ratelimitsStatus()).toMatchObject({ state: 'running' });
      expect(countOf('SELECT count(*)::int AS n FROM rm_ratelimits.company_limits')).toBe(500);
    }, TIMEOUT);

    /** Starts a rebuild and blocks its replay on a table lock: its stop then waits for that statement. */
    async function stuckRebuild() {
      const { command, db } = await replayingRebuild();
      await db.query('BEGIN');
      await db.query('LOCK TABLE rm_ratelimits__next.company_limits IN ACCESS EXCLUSIVE MODE');
      return { command, db, pid: postmasterPid()! };
    }

    it('a second signal while the stop waits: exits at once with its code and a second line; Postgres stopped', async () => {
      const { command, pid } = await stuckRebuild();
      command.child.kill('SIGTERM');
      for (let i = 0; i < 400 && !command.stderr().includes('interrupted by'); i++) await new Promise((r) => setTimeout(r, 25));
      command.child.kill('SIGINT');

      expect(await command.exited).toEqual({ code: 130, signal: null });
      expect(command.stderr()).toBe(
        `switchboard: interrupted by SIGTERM; ${REBUILD_LEFT}\nswitchboard: SIGINT while stopping after SIGTERM; exiting without waiting for the stop\n`,
      );
      expect(command.stderr()).not.toMatch(STACK_LINE);
      expect(await postgresStopped(pid)).toBe(true);
      expect(cli(['projections', 'status']).status).toBe(0);
    }, TIMEOUT);

    it('a stop stuck past its 10 s: exits with the signal\'s code and a line saying so; Postgres stopped', async () => {
      const { command, pid } = await stuckRebuild();
      command.child.kill('SIGINT');

      expect(await command.exited).toEqual({ code: 130, signal: null });
      expect(command.stderr()).toBe(`switchboard: interrupted by SIGINT; ${REBUILD_LEFT}\nswitchboard: the stop after SIGINT took longer than 10 s; exiting\n`);
      expect(await postgresStopped(pid)).toBe(true);
      expect(cli(['projections', 'status']).status).toBe(0);
    }, TIMEOUT);
  });
});
