import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CliProcess, startServeOnAnyPort } from '../support/cli-process';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// The built program, as an operator runs it: `switchboard serve` with no configuration but a data dir.

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...extra };
  return env;
}

async function waitHealthy(url: string, serve: CliProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (serve.child.exitCode !== null) throw new Error(`serve exited with ${serve.child.exitCode}: ${serve.output()}`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.status === 200) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`serve did not become healthy: ${serve.output()}`);
}

/**
 * `serve` on PORT=0: the system picks a free port as it binds, the URL read from the line it prints (a port found free
 * first could be taken before the child bound it). Each start has its own URL.
 */
const startServe = (dataDir: string) => startServeOnAnyPort(cleanEnv({ DATA_DIR: dataDir }));

async function stop(server: CliProcess): Promise<number | null> {
  const { child } = server;
  const code = await new Promise<number | null>((ok) => {
    if (child.exitCode !== null) return ok(child.exitCode);
    child.once('exit', (c) => ok(c));
    child.kill('SIGTERM');
  });
  if (code !== 0) console.error(`serve exited with ${code}:\n${server.output()}`);
  return code;
}

const d = describeWithBuiltCli('CLI end-to-end suite');

d('switchboard serve (built CLI, embedded default)', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-'));
    // mkdtemp makes it 0700; as root, Postgres runs as the postgres user, who must reach DATA_DIR/pg (else the cluster moves: embedded-private-dir.test.ts)
    chmodSync(dataDir, 0o755);
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('starts with no configuration, answers /healthz and /readyz, shuts down cleanly, and keeps its data across a restart', async () => {
    const { serve: first, url } = await startServe(dataDir);
    try {
      await waitHealthy(url, first);
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(first.output()).toContain(`switchboard listening on ${url}`);
      const ready = await fetch(`${url}/readyz`);
      expect(ready.status).toBe(200);
    } finally {
      expect(await stop(first)).toBe(0);
    }
    expect(existsSync(join(dataDir, 'pg', 'PG_VERSION'))).toBe(true);
    expect(existsSync(join(dataDir, 'secrets.json'))).toBe(true);

    // Write through the CLI (an API key), restart, and find it again.
    const env = cleanEnv({ DATA_DIR: dataDir });
    const events = spawnSync(process.execPath, [CLI, 'events', 'export'], { env, encoding: 'utf8' });
    expect(events.status).toBe(0);
    const before = events.stdout.trim().split('\n').filter(Boolean).length;

    const { serve: second, url: secondUrl } = await startServe(dataDir);
    try {
      await waitHealthy(secondUrl, second);
    } finally {
      expect(await stop(second)).toBe(0);
    }
    const again = spawnSync(process.execPath, [CLI, 'events', 'export'], { env, encoding: 'utf8' });
    expect(again.status).toBe(0);
    expect(before).toBeGreaterThan(0); // the demo company seeded on the fresh data dir
    expect(again.stdout.trim().split('\n').filter(Boolean).length).toBe(before); // nothing lost, demo not seeded twice
    const status = spawnSync(process.execPath, [CLI, 'projections', 'status', '--json'], { env, encoding: 'utf8' });
    expect(status.status).toBe(0);
    const rows = status.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(rows.map((r) => r.name)).toContain('apikeys');
    for (const r of rows) expect(r).toMatchObject({ state: 'running', lag: 0 });
    const schemas = spawnSync(process.execPath, [CLI, 'events', 'schemas'], { env, encoding: 'utf8' });
    expect(schemas.status).toBe(0);
    expect(schemas.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).type)).toContain('ApiKeyIssued');
  });
});
