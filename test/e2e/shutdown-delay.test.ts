import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, freePort, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// SHUTDOWN_DELAY_S (docs/core.md, "Runtime"): at SIGTERM, /readyz answers 503 at once while the API is still served
// until the delay ends; then the stop goes on as without it, and the process exits 0.

const FIXTURE = join(ROOT, 'test/fixtures/example-fixture.json');
const TIMEOUT = 120_000;
const d = describeWithBuiltCli('shutdown delay suite');

d('serve: SIGTERM with SHUTDOWN_DELAY_S (built CLI)', () => {
  let db: TestDatabase;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let url: string;
  let apiKey: string;
  let serve: ChildProcess | undefined;
  let out = '';

  const cli = (...args: string[]) => {
    const r = spawnSync(process.execPath, [CLI, ...args], { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`switchboard ${args.join(' ')} exited with ${r.status}: ${r.stderr}`);
    return r.stdout;
  };
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const r = await fetch(`${url}${path}`, { headers });
    return { status: r.status, body: await r.json() };
  };

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-shutdown-delay-'));
    url = `http://127.0.0.1:${await freePort()}`;
    env = e2eServerEnv({ dataDir, port: new URL(url).port, databaseUrl: db.url, logLevel: 'info' }, { SHUTDOWN_DELAY_S: '3' });
    cli('seed', FIXTURE);
    apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e shutdown delay').trim();
    serve = spawn(process.execPath, [CLI, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    serve.stdout!.on('data', (x) => (out += x));
    serve.stderr!.on('data', (x) => (out += x));
    for (let i = 0; i < 1200 && !out.includes(`listening on ${url}`); i++) await new Promise((r) => setTimeout(r, 50));
  }, TIMEOUT);

  afterAll(async () => {
    if (serve && serve.exitCode === null) {
      serve.kill('SIGKILL');
      await new Promise((ok) => serve!.once('exit', ok));
    }
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('turns /readyz to 503 at once, serves the API until the delay ends, then stops and exits 0', async () => {
    expect(out).toContain(`listening on ${url}`);
    expect(await get('/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
    const exit = new Promise<number | null>((ok) => serve!.once('exit', (code) => ok(code)));
    serve!.kill('SIGTERM');

    let readiness = await get('/readyz');
    for (let i = 0; i < 100 && readiness.status === 200; i++) readiness = await get('/readyz');
    expect(readiness).toEqual({ status: 503, body: { status: 'not ready', checks: { server: 'stopping' } } });
    // still serving: a load balancer that has not seen the 503 yet loses nothing
    const accounts = await get('/api/v1/business-accounts/', { 'x-api-key': apiKey });
    expect(accounts.status).toBe(200);
    expect((accounts.body as { apiKeyName: string }).apiKeyName).toBe('e2e shutdown delay');
    expect(serve!.exitCode).toBeNull();

    expect(await exit).toBe(0);
    expect(out).toContain('"msg":"not ready: serving on until the shutdown delay ends"');
    await expect(fetch(`${url}/readyz`)).rejects.toThrow();
  }, TIMEOUT);
});
