import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, freePort, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';

// The event store, as the user configures and addresses it (found in review): a malformed EVENTSTORE_URL, an
// EventStoreDB nothing answers for, and an `events export --from` that is not a position. Each is one line naming
// the setting or option, the cause and the fix; exit 1, no stack trace. (No EventStoreDB server runs here: the
// unreachable one is a closed loopback port.)

const SECRETS = { ANONYMIZATION_SECRET: 'event-store-errors-anon', API_KEY_PEPPER: 'event-store-errors-pepper' };
const MALFORMED = { EVENT_STORE: 'esdb', EVENTSTORE_URL: 'localhost:2113' };
/** the configuration error (every command prints it in the start-up line, with its fix) */
const CONFIG_LINE =
  'invalid configuration: EVENTSTORE_URL: not an EventStoreDB connection string (at position 0, expected esdb:// or esdb+discover://); '
  + 'the form is esdb://host:2113?tls=false';

/** A port nothing listens on: bound, then released. */
const closedPort = (): Promise<number> =>
  new Promise((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });

/** Runs the built CLI with only `env` (and PATH, HOME); a process still running after 40 s is killed. */
function run(args: string[], env: Record<string, string>) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    encoding: 'utf8',
    timeout: 40_000,
  });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, lines: r.stderr.split('\n').filter((l) => l.trim() !== '') };
}

/** Exit 1, exactly `line` on stderr, no stack trace anywhere. */
function expectOneLine(r: ReturnType<typeof run>, line: string | RegExp): void {
  expect({ status: r.status, signal: r.signal, lines: r.lines.length }).toEqual({ status: 1, signal: null, lines: 1 });
  if (typeof line === 'string') expect(r.lines[0]).toBe(line);
  else expect(r.lines[0]).toMatch(line);
  expect(r.stderr).not.toMatch(STACK_LINE);
  expect(r.stdout).not.toMatch(STACK_LINE);
}

const d = describeWithBuiltCli('event store errors suite');

d('event store errors: one line naming the cause and the fix (built CLI)', () => {
  let db: TestDatabase;
  let base: Record<string, string>;
  beforeAll(async () => {
    db = await createTestDatabase();
    base = { DATABASE_URL: db.url, ...SECRETS, PORT: String(await freePort()) };
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('a malformed EVENTSTORE_URL (EVENT_STORE=esdb)', () => {
    it.each(['serve', 'worker'])('%s: names EVENTSTORE_URL, where it goes wrong and the form', (role) => {
      expectOneLine(run([role], { ...base, ...MALFORMED }), `switchboard: cannot start: ${CONFIG_LINE}; correct those environment variables and start again`);
    });

    it.each([[['projections', 'status']], [['events', 'export']]])('%j: the same, as a one-shot command', (args) => {
      expectOneLine(run(args, { ...base, ...MALFORMED }), `switchboard: cannot start: ${CONFIG_LINE}; correct those environment variables and start again`);
    });
  });

  describe('an EventStoreDB that does not answer (a closed loopback port)', () => {
    const unreachable = async () => {
      const port = await closedPort();
      return { port, env: { EVENT_STORE: 'esdb', EVENTSTORE_URL: `esdb://admin:esdb-pw@127.0.0.1:${port}?tls=false`, STARTUP_WAIT_S: '1' } };
    };
    const line = (port: number) =>
      `EventStoreDB at 127.0.0.1:${port} (EVENTSTORE_URL) is not reachable (connection refused; retried for 1 s); `
      + 'start EventStoreDB or correct the host and port in EVENTSTORE_URL (esdb://host:2113?tls=false for a server without TLS; STARTUP_WAIT_S sets the wait)';

    it.each(['serve', 'worker'])('%s: fails the start, after the bounded wait, instead of serving', async (role) => {
      const { port, env } = await unreachable();
      const r = run([role], { ...base, ...env });
      expectOneLine(r, `switchboard: cannot start: ${line(port)}`);
      expect(r.stdout).not.toMatch(/listening|projection batch failed/);
      expect(r.stderr).not.toContain('esdb-pw');
    });

    it('events export: the same line, as a one-shot command', async () => {
      const { port, env } = await unreachable();
      expectOneLine(run(['events', 'export'], { ...base, ...env }), `switchboard: cannot start: ${line(port)}`);
    });
  });

  describe('events export --from (Postgres)', () => {
    it('a text that is not a position: names --from and the expected form; a position is taken', () => {
      for (const from of ['garbage', '1:2:3', '12', '99999999999999999999:1']) {
        const r = run(['events', 'export', '--from', from], base);
        expectOneLine(
          r,
          `switchboard: --from ${JSON.stringify(from)} is not a position of the postgres event store: `
            + 'expected "<transaction id>:<sequence>", two integers such as "7042:315" (the "position" of an exported line)',
        );
        expect(r.stdout).toBe('');
      }
      const taken = run(['events', 'export', '--from', '1:1'], base);
      expect({ status: taken.status, stdout: taken.stdout }).toEqual({ status: 0, stdout: '' });
      expect(taken.stderr).toMatch(/^exported 0 events \(scanned 0\); resume with --from '1:1'$/m);
    });
  });
});
