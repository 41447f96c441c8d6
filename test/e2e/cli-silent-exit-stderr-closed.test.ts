import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT } from '../support/e2e-server';
import { isRunning, postmasterPidOf, untilStopped } from '../support/embedded-process';

// A one-shot command whose caller closed its ends of stdout and stderr and then sent SIGTERM, as spawnSync does when
// its `timeout` runs out. It exited 1 and said nothing (test/e2e/cli-signals-review6.test.ts saw it twice under load:
// its 120-s bound on the second `projections rebuild` ran out, and its helper read only the status): the
// interruption's line was an EPIPE that nobody listened for, an uncaught exception that could not be reported either,
// which ended the process in the middle of its stop. Nothing can be told to a reader that is gone: the command goes
// on to its stop and exits 143, as when its stderr is read (src/cli/stderr-gone.ts, docs/install.md "Start-up errors").

const TIMEOUT = 180_000;

const d = describeWithBuiltCli('one-shot command with a closed stderr suite');

d('a one-shot command whose stderr reader is gone (built CLI, embedded default)', () => {
  let dir: string;
  let dataDir: string;
  let pids: number[] = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cli-silent-exit-'));
    dataDir = join(dir, 'data');
  });

  afterEach(async () => {
    for (const pid of pids) if (isRunning(pid)) process.kill(pid, 'SIGKILL');
    pids = [];
    const pg = existsSync(join(dataDir, 'embedded-postgres.json')) ? postmasterPidOf(dataDir) : undefined;
    if (pg && isRunning(pg)) {
      process.kill(pg, 'SIGINT');
      await untilStopped(pg);
    }
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('SIGTERM after its caller closed stdout and stderr: exit 143 after its stop, Postgres stopped (was 1, silently)', async () => {
    // `import-messages -` waits on a stdin that stays open: the command is under way, its runtime started
    const child = spawn(process.execPath, [CLI, 'import-messages', '-'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    pids.push(child.pid!);
    let stderr = '';
    child.stderr!.on('data', (x) => (stderr += x));
    const exited = new Promise<{ code: number | null; signal: string | null }>((ok) => child.once('exit', (code, signal) => ok({ code, signal })));

    // its embedded Postgres is up once its pid file is there: the command listens for its stop signals by then
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the command ended (${child.exitCode}) too early: ${stderr}`);
      if (existsSync(join(dataDir, 'embedded-postgres.json')) && postmasterPidOf(dataDir) !== undefined) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const postgres = postmasterPidOf(dataDir)!;

    child.stdout!.destroy();
    child.stderr!.destroy();
    child.kill('SIGTERM');

    expect({ exit: await exited, postgresStopped: await untilStopped(postgres) }).toEqual({
      exit: { code: 143, signal: null },
      postgresStopped: true,
    });
    child.stdin!.destroy();
  }, TIMEOUT);
});
