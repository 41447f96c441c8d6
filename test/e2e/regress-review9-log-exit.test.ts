// Review 9 (fixed 2026-11-27, evening; fails on 6a64e41): `serve` whose stdout is a pipe that IS read, only more
// slowly than it logs (a log shipper under load). Since src/cli/log-output.ts its lines go through Node's
// process.stdout: what the pipe cannot take yet waits in Node's memory (up to 1 MiB), and `process.exit(0)` right
// after the stop dropped all of it (about 1,100 of 1,500 request lines and the "shutting down" line). Now the exit
// waits for them, at most 5 s (LOG_DRAIN_MS in src/cli/serve.ts). With stdout a file, or a pipe read promptly,
// nothing was lost before either.
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVE_LISTENING_LINE } from '../support/cli-process';
import { BUILT_CLI as CLI, describeWithBuiltCli } from '../support/e2e-server';
import { isRunning, postmasterPidOf, untilStopped } from '../support/embedded-process';

const TIMEOUT = 240_000;
/** each logs one warning line (no PROVIDER_APP_SECRET): ~200 KB, several times what a pipe holds, under the 1 MiB cap */
const LOGGED_REQUESTS = 1500;
/** how long the reader is away after the signal (it comes back once serve has exited, or after this): under LOG_DRAIN_MS */
const READER_AWAY_MS = 2_000;

const d = describeWithBuiltCli('serve log lines at exit suite');

d('serve whose stdout pipe is read slowly keeps its last log lines (built CLI, embedded default)', () => {
  let dataDir: string;
  let child: ChildProcess | undefined;

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-review9-log-exit-'));
    chmodSync(dataDir, 0o755);
  });
  afterAll(async () => {
    if (child && child.exitCode === null && !child.signalCode) child.kill('SIGKILL');
    const postmaster = postmasterPidOf(dataDir);
    if (postmaster && isRunning(postmaster)) {
      process.kill(postmaster, 'SIGINT');
      await untilStopped(postmaster);
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('every request line and the shutdown line reach a reader that reads on after a pause', async () => {
    // PORT=0: the system picks the port as serve binds it, its URL read from the line it prints (a port found free first
    // could be taken before the child bound it)
    child = spawn(process.execPath, [CLI, 'serve'], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info', SHUTDOWN_DELAY_S: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let errors = '';
    child.stdout!.on('data', (x) => (out += x));
    child.stderr!.on('data', (x) => (errors += x));
    const closed = new Promise<void>((ok) => child!.stdout!.once('close', () => ok()));
    const exited = new Promise<number | null>((ok) => child!.once('exit', (code) => ok(code)));
    let healthy = false;
    let url: string | undefined;
    for (let i = 0; i < 1200 && !healthy; i++) {
      url = SERVE_LISTENING_LINE.exec(out)?.[1];
      healthy = url !== undefined && (await fetch(`${url}/healthz`).then((r) => r.status, () => 0)) === 200;
      if (!healthy) await new Promise((r) => setTimeout(r, 100));
    }
    expect({ healthy, errors }).toEqual({ healthy: true, errors: '' });
    await new Promise((r) => setTimeout(r, 500)); // the start-up lines read

    child.stdout!.pause(); // the reader falls behind
    for (let i = 0; i < LOGGED_REQUESTS; i++) {
      const status = await fetch(`${url}/webhooks/provider`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }).then((r) => r.status);
      expect(status).toBe(401);
    }
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, READER_AWAY_MS))]);
    child.stdout!.resume(); // the reader reads on
    expect(await exited).toBe(0);
    await closed;

    const lines = out.split('\n');
    expect({
      requestLines: lines.filter((l) => l.includes('"level":40')).length,
      shutdownLine: lines.some((l) => l.includes('shutting down')),
    }).toEqual({ requestLines: LOGGED_REQUESTS, shutdownLine: true });
  }, TIMEOUT);
});
