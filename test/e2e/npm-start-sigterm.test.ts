// `npm start` runs `serve` under `sh -c`, and a SIGTERM sent to npm reaches that shell only: the shell died, and
// `serve` (re-parented) kept running and serving with its embedded Postgres (found walking the README, 2026-11-27).
// Under npm (`npm_lifecycle_event` set) `serve` now stops as on SIGTERM once its launcher is gone. The test runs the
// script's shell as npm does (`sh -c`, with `; :` so the shell cannot exec node in its place) and signals the shell.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVE_LISTENING_LINE } from '../support/cli-process';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT } from '../support/e2e-server';
import { isRunning, postmasterPidOf, untilStopped } from '../support/embedded-process';

const TIMEOUT = 150_000;
const d = describeWithBuiltCli('npm start SIGTERM suite');

async function until(what: string, done: () => boolean, waitMs = 60_000): Promise<void> {
  for (const deadline = Date.now() + waitMs; Date.now() < deadline;) {
    if (done()) return;
    await new Promise((ok) => setTimeout(ok, 25));
  }
  throw new Error(`never: ${what}`);
}

d('serve started by an npm script', () => {
  let dataDir: string;
  let shell: ChildProcess | undefined;
  let servePid: number | undefined;

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-npm-start-'));
  });
  afterEach(async () => {
    if (servePid && isRunning(servePid)) process.kill(servePid, 'SIGKILL');
    if (shell && shell.exitCode === null && shell.signalCode === null) shell.kill('SIGKILL');
    const pg = existsSync(join(dataDir, 'embedded-postgres.json')) ? postmasterPidOf(dataDir) : undefined;
    if (pg && isRunning(pg)) {
      process.kill(pg, 'SIGINT');
      await untilStopped(pg);
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a SIGTERM to the script\'s shell (what npm passes on) stops serve and its embedded Postgres', async () => {
    // PORT=0: the system picks the port as serve binds it (a port found free first could be taken before serve bound
    // it); the line it prints names the one it got
    let out = '';
    shell = spawn('sh', ['-c', `"${process.execPath}" "${CLI}" serve; :`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info', npm_lifecycle_event: 'start' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let outputClosed = false;
    shell.stdout!.on('data', (x) => (out += x)).on('close', () => (outputClosed = true));
    shell.stderr!.on('data', (x) => (out += x));
    await until('the listening line', () => SERVE_LISTENING_LINE.test(out));
    expect(SERVE_LISTENING_LINE.exec(out)![1]).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    servePid = Number(execFileSync('pgrep', ['-P', String(shell.pid)], { encoding: 'utf8' }).trim().split('\n')[0]);
    const postgres = postmasterPidOf(dataDir)!;
    expect(isRunning(servePid) && isRunning(postgres)).toBe(true);

    shell.kill('SIGTERM');
    // serve's stdout (the pipe it shares with the shell) closes when serve exits
    await until('serve to exit', () => outputClosed && !isRunning(servePid!));
    expect(out).toContain('the npm process that started this one is gone');
    expect(await untilStopped(postgres)).toBe(true);
  }, TIMEOUT);
});
