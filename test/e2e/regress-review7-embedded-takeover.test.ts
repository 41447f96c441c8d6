import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI, describeWithBuiltCli, PROJECT_ROOT } from '../support/e2e-server';
import { isRunning as running, postmasterPidOf } from '../support/embedded-process';

// Review 7 (2026-11-27) of the embedded takeover (a later start stops a server whose recorded owner is gone and
// starts it again as its own). Both cases passed on dc396bb (the start attached to the orphan, as to any running
// server) and fail since 5c1007d.

const TIMEOUT = 180_000;
const d = describeWithBuiltCli('regress-review7 embedded takeover suite');

interface Exit { code: number | null; signal: NodeJS.Signals | null }
interface Run { child: ChildProcess; out: () => string; exited: Promise<Exit> }

d('embedded takeover with other processes on the same DATA_DIR (built CLI)', () => {
  let work: string;
  let dataDir: string;
  const runs: Run[] = [];
  const postmasters = new Set<number>();

  const run = (args: string[], extra: NodeJS.ProcessEnv = {}): Run => {
    const child = spawn(process.execPath, [BUILT_CLI, ...args], {
      cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...extra },
    });
    let out = '';
    child.stdout!.on('data', (x) => (out += x));
    child.stderr!.on('data', (x) => (out += x));
    const exited = new Promise<Exit>((ok) => child.once('exit', (code, signal) => ok({ code, signal })));
    const r = { child, out: () => out, exited };
    runs.push(r);
    return r;
  };
  const serve = async (): Promise<{ run: Run; url: string }> => {
    // PORT=0: the system picks the port as serve binds it (a port found free first could be taken before the child
    // bound it); the URL is read from the line it prints
    const r = run(['serve'], { PORT: '0' });
    for (let i = 0; i < 1200 && !/listening on http:/.test(r.out()); i++) {
      if (r.child.exitCode !== null) throw new Error(`serve exited before listening: ${r.out()}`);
      await new Promise((ok) => setTimeout(ok, 50));
    }
    return { run: r, url: /listening on (http:\/\/\S+)/.exec(r.out())![1] };
  };
  const postmasterPid = (): number | undefined => {
    const pid = postmasterPidOf(dataDir);
    if (pid !== undefined) postmasters.add(pid);
    return pid;
  };
  /** A Postgres left running by a serve killed with SIGKILL (no process attached to it). */
  const orphanedServer = async (): Promise<number> => {
    const owner = await serve();
    const pid = postmasterPid()!;
    owner.run.child.kill('SIGKILL');
    await owner.run.exited;
    expect(running(pid)).toBe(true);
    return pid;
  };
  const readyz = async (url: string) => {
    const res = await fetch(`${url}/readyz`);
    return { status: res.status, body: (await res.json()) as unknown };
  };

  beforeEach(() => {
    work = mkdtempSync(join(tmpdir(), 'regress-review7-takeover-'));
    chmodSync(work, 0o755); // reachable by the postgres OS user when run as root: no relocation
    dataDir = join(work, 'data');
  });

  afterEach(async () => {
    for (const r of runs.splice(0)) {
      if (r.child.exitCode === null && !r.child.signalCode) {
        r.child.kill('SIGTERM');
        await r.exited;
      }
    }
    postmasterPid();
    for (const pid of postmasters) if (running(pid)) process.kill(pid, 'SIGINT');
    for (const pid of postmasters) for (let i = 0; i < 200 && running(pid); i++) await new Promise((ok) => setTimeout(ok, 50));
    postmasters.clear();
    rmSync(work, { recursive: true, force: true });
  });

  it('a serve attached to a server whose owner was SIGKILLed keeps its database after a one-shot command runs', async () => {
    const owner = await serve();
    const attached = await serve(); // shares the owner's server
    owner.run.child.kill('SIGKILL');
    await owner.run.exited;
    expect(await readyz(attached.url)).toMatchObject({ status: 200 });

    const keys = run(['keys', 'list']);
    expect(await keys.exited).toEqual({ code: 0, signal: null });

    // since 5c1007d: `keys list` stopped the orphan (under the attached serve), started its own server, and stopped
    // that one as it ended: the serve answers 503 (ECONNREFUSED) from then on, with nothing to start its database again
    expect(await readyz(attached.url)).toEqual({ status: 200, body: { status: 'ready', checks: { database: 'ok', eventStore: 'ok' } } });
  }, TIMEOUT);

  it('two commands started at once on a server left by a SIGKILLed serve both succeed', async () => {
    await orphanedServer();
    const first = run(['keys', 'list']);
    const second = run(['keys', 'list']);
    const exits = await Promise.all([first.exited, second.exited]);

    // since 5c1007d: both find the orphan; the one whose check comes after the other's SIGINT sees no answer and starts
    // a server of its own on the pid file still there: exit 1, `FATAL: lock file "postmaster.pid" already exists`
    // (with `serve` as one of them, the serve fails to start)
    expect({ exits, out: [first.out(), second.out()].filter((o) => /cannot start/.test(o)) }).toEqual({
      exits: [{ code: 0, signal: null }, { code: 0, signal: null }], out: [],
    });
  }, TIMEOUT);
});
