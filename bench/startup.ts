// `switchboard serve` with no configuration: time until /healthz answers 200 on a first start (fresh DATA_DIR,
// initdb + migrations + demo) and on a restart. Uses the built CLI (`npm run build`).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { emit, log } from './support';

const CLI = resolve(process.cwd(), 'dist/cli.js'); // benches run from the repository root

const freePort = () =>
  new Promise<number>((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });

async function timeToHealthy(dataDir: string, port: number): Promise<number> {
  const t0 = Date.now();
  const child = spawn(process.execPath, [CLI, 'serve'], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: 'ignore',
  });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`serve exited with ${child.exitCode}`);
      try {
        if ((await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200) return Date.now() - t0;
      } catch {
        /* not yet */
      }
      if (Date.now() - t0 > 60_000) throw new Error('serve did not become healthy within 60 s');
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await new Promise<void>((ok) => {
      if (child.exitCode !== null) return ok();
      child.once('exit', () => ok());
      child.kill('SIGTERM');
    });
  }
}

async function main(): Promise<void> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-startup-'));
  try {
    const port = await freePort();
    log('first start (fresh data dir)');
    const first = await timeToHealthy(dir, port);
    emit({ bench: 'startup', metric: 'first_start_healthz_ms', value: first, unit: 'ms', budget: 10_000 });
    const restarts: number[] = [];
    for (let i = 0; i < 3; i++) restarts.push(await timeToHealthy(dir, port));
    emit({ bench: 'startup', metric: 'restart_healthz_ms', value: Math.max(...restarts), unit: 'ms', budget: 3_000, runs: restarts });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
