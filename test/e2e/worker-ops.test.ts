import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, freePort } from '../support/e2e-server';

// `switchboard worker` with WORKER_OPS_PORT (the built CLI on a test database): /healthz, /readyz and /metrics on
// that port, so a worker can be probed and scraped like `serve`; no API routes, nothing on PORT.

const d = describeWithBuiltCli('worker ops listener suite');

d('switchboard worker: the ops listener (built CLI)', () => {
  let db: TestDatabase;
  let dataDir: string;
  let worker: ChildProcess;
  let out = '';
  let ops: string;
  let apiPort: number;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-worker-ops-'));
    apiPort = await freePort();
    const opsPort = await freePort();
    const env = e2eServerEnv({ dataDir, port: String(apiPort), databaseUrl: db.url, logLevel: 'warn' }, { WORKER_OPS_PORT: String(opsPort) });
    worker = spawn(process.execPath, [CLI, 'worker'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    worker.stdout!.on('data', (x) => (out += x));
    worker.stderr!.on('data', (x) => (out += x));
    ops = `http://127.0.0.1:${opsPort}`;
    const deadline = Date.now() + 60_000;
    while (!out.includes(`/healthz, /readyz and /metrics on ${ops}`)) {
      if (worker.exitCode !== null) throw new Error(`worker exited with ${worker.exitCode}: ${out}`);
      if (Date.now() > deadline) throw new Error(`the worker did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }, 90_000);

  afterAll(async () => {
    if (worker?.exitCode === null) {
      worker.kill('SIGKILL');
      await new Promise((ok) => worker.once('exit', ok));
    }
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints where it listens, one line on stdout', () => {
    expect(out.trim()).toMatch(new RegExp(`^switchboard worker started; /healthz, /readyz and /metrics on ${ops} \\(ready in \\d+ ms\\)$`));
  });

  it('answers /healthz and /readyz with its checks', async () => {
    const health = await fetch(`${ops}/healthz`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
    const ready = await fetch(`${ops}/readyz`);
    expect([ready.status, await ready.json()]).toEqual([200, { status: 'ready', checks: { database: 'ok', eventStore: 'ok' } }]);
  });

  it("answers /metrics from the worker's own registry: its projections, webhook queue and process", async () => {
    const res = await fetch(`${ops}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toMatch(/^switchboard_projection_lag_seconds\{projection="sends"\} \d/m);
    expect(text).toMatch(/^switchboard_webhook_deliveries_due 0$/m);
    expect(text).toMatch(/^# TYPE switchboard_webhook_attempts_total counter$/m);
    expect(text).toMatch(/^process_start_time_seconds \d+/m);
  });

  it('serves no API: a 404 in the API error shape on the ops port, and nothing listens on PORT', async () => {
    const res = await fetch(`${ops}/api/v1/business-accounts/`);
    expect([res.status, await res.json()]).toEqual([404, { error: 'no route for GET /api/v1/business-accounts/' }]);
    await expect(fetch(`http://127.0.0.1:${apiPort}/healthz`)).rejects.toThrow();
  });

  it('stops on SIGTERM with exit 0', async () => {
    const code = await new Promise<number | null>((ok) => {
      worker.once('exit', (c) => ok(c));
      worker.kill('SIGTERM');
    });
    expect(code).toBe(0);
  });
});
