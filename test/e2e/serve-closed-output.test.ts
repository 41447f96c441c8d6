import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI as CLI, describeWithBuiltCli, freePort } from '../support/e2e-server';
import { isRunning, postmasterPidOf, untilStopped } from '../support/embedded-process';

// `serve` whose stdout stops taking its logs (docs/install.md, "Running without a terminal"): a pipe nobody reads, a pipe whose reader is
// gone (EPIPE), a terminal that closed (SIGHUP, then EIO). It must keep serving, stop on its signal and stop its
// embedded Postgres. Before: a full pipe or a closed terminal left it retrying its log writes forever at exit (deaf to
// signals, Postgres never stopped), and a pipe whose reader was gone crashed it on its first line.

const TIMEOUT = 180_000;
/** The stop's own bound (SHUTDOWN_DELAY_S 0 + the 30 s forced exit) and a margin: past it the process is hung. */
const HUNG_AFTER_MS = 60_000;
/** Each logs a warning (no PROVIDER_APP_SECRET): ~300 KB of log lines, several times what a pipe holds. */
const LOGGED_REQUESTS = 2000;

const d = describeWithBuiltCli('serve with a closed output suite');

d('serve whose stdout is not read, gone or a closed terminal (built CLI, embedded default)', () => {
  let dataDir: string;
  let children: ChildProcess[] = [];
  let servePid: number | undefined;
  let errors = '';

  const env = (port: number): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'info', SHELL: '/bin/sh',
  });

  /** A zombie (reparented after its terminal's `script` died) has stopped too. */
  const alive = (pid: number) => isRunning(pid) && !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));

  const untilExited = async (pid: number): Promise<boolean> => {
    for (const deadline = Date.now() + HUNG_AFTER_MS; alive(pid) && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 100));
    return !alive(pid);
  };

  const waitHealthy = async (url: string, pid: () => number | undefined) => {
    for (let i = 0; i < 600; i++) {
      const p = pid();
      if (p !== undefined && !alive(p)) throw new Error(`serve exited before it answered: ${errors}`);
      if ((await fetch(`${url}/healthz`).then((r) => r.status, () => 0)) === 200) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`serve never answered /healthz: ${errors}`);
  };

  /** Requests that each log a line: their statuses (0: no answer), up to the first that is not the first one's. */
  const logALot = async (url: string) => {
    const statuses = new Set<number>();
    for (let i = 0; i < LOGGED_REQUESTS && statuses.size < 2; i++) {
      const init = { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(HUNG_AFTER_MS) };
      statuses.add(await fetch(`${url}/webhooks/provider`, init).then((r) => r.status, () => 0));
    }
    return [...statuses];
  };

  const serve = (port: number, stdout: 'unread' | 'gone') => {
    const child = spawn(process.execPath, [CLI, 'serve'], { env: env(port), stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    servePid = child.pid;
    child.stderr!.on('data', (x) => (errors += x));
    if (stdout === 'gone') child.stdout!.destroy();
    else child.stdout!.pause(); // never read: the pipe fills
    return child;
  };

  /** SIGTERM: within its bound, exit 0 and the embedded Postgres stopped. */
  const expectGracefulStop = async (child: ChildProcess) => {
    const postmaster = postmasterPidOf(dataDir);
    const exit = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));
    child.kill('SIGTERM');
    expect(await untilExited(child.pid!)).toBe(true);
    expect(await exit).toBe(0);
    expect(postmaster === undefined || (await untilStopped(postmaster))).toBe(true);
  };

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-closed-output-'));
    // as root, Postgres runs as the postgres user, who must reach DATA_DIR/pg (embedded-private-dir.test.ts)
    chmodSync(dataDir, 0o755);
  });

  afterEach(async () => {
    // what a failing version leaves: a hung serve, its Postgres
    if (servePid !== undefined && alive(servePid)) process.kill(servePid, 'SIGKILL');
    for (const c of children) if (c.exitCode === null && !c.signalCode) c.kill('SIGKILL');
    const postmaster = existsSync(join(dataDir, 'embedded-postgres.json')) ? postmasterPidOf(dataDir) : undefined;
    if (postmaster && isRunning(postmaster)) {
      process.kill(postmaster, 'SIGINT');
      await untilStopped(postmaster);
    }
    children = [];
    servePid = undefined;
    errors = '';
  });

  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('stdout a pipe whose reader is gone from the start: serves, logs, stops on SIGTERM', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const child = serve(port, 'gone');
    await waitHealthy(url, () => child.pid);
    expect(await logALot(url)).toEqual([401]);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await expectGracefulStop(child);
    expect(errors).not.toMatch(/EPIPE|Unhandled/);
  }, TIMEOUT);

  it('stdout a pipe nobody reads (it fills): serves, logs, stops on SIGTERM', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const child = serve(port, 'unread');
    await waitHealthy(url, () => child.pid);
    expect(await logALot(url)).toEqual([401]);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await expectGracefulStop(child);
  }, TIMEOUT);

  /** serve on a terminal of its own (util-linux `script`, which copies the terminal's output to its stdout) */
  const serveOnATerminal = async (port: number) => {
    const pidFile = join(dataDir, 'serve.pid');
    rmSync(pidFile, { force: true });
    const terminal = spawn('script', ['-qfec', `echo $$ > ${pidFile}; exec ${process.execPath} ${CLI} serve`, '/dev/null'], {
      env: env(port), stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(terminal);
    terminal.stderr!.on('data', (x) => (errors += x));
    const pid = () => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) || undefined : undefined);
    await waitHealthy(`http://127.0.0.1:${port}`, () => (servePid = pid()));
    return terminal;
  };

  it('its terminal closes (SIGHUP, then EIO on every write): it stops and stops its Postgres', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const terminal = await serveOnATerminal(port);
    terminal.stdout!.resume();
    expect(await logALot(url)).toEqual([401]);
    const postmaster = postmasterPidOf(dataDir);

    terminal.kill('SIGKILL'); // its terminal closes
    expect(await untilExited(servePid!)).toBe(true);
    // Node 20 then aborts in its own exit (it cannot restore the closed terminal: nodejs/node#51519); the stop is done
    expect(postmaster === undefined || (await untilStopped(postmaster))).toBe(true);
    expect(await fetch(`${url}/healthz`).then(() => 'answered', () => 'closed')).toBe('closed');
  }, TIMEOUT);

  it('its terminal stops reading (the output of the terminal is blocked): serves, logs, stops on SIGTERM', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const terminal = await serveOnATerminal(port);
    terminal.stdout!.pause(); // `script` blocks on its stdout, so it stops reading the terminal, which fills
    expect(await logALot(url)).toEqual([401]);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const postmaster = postmasterPidOf(dataDir);

    const exit = new Promise<number | null>((ok) => terminal.once('exit', (code) => ok(code)));
    process.kill(servePid!, 'SIGTERM');
    expect(await untilExited(servePid!)).toBe(true);
    terminal.stdout!.resume(); // `script` copies out what is left, then exits with serve's status (-e)
    expect(await exit).toBe(0);
    expect(postmaster === undefined || (await untilStopped(postmaster))).toBe(true);
  }, TIMEOUT);
});
