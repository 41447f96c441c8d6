import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type CliProcess, runCli, startServeOnAnyPort } from '../support/cli-process';
import { describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT } from '../support/e2e-server';

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
  let serve: CliProcess | undefined;

  const cli = (...args: string[]) => runCli(env, args);
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const r = await fetch(`${url}${path}`, { headers });
    return { status: r.status, body: await r.json() };
  };

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-shutdown-delay-'));
    // 10 s: the readiness loop, a read and the check that the process still runs must all fall inside the delay,
    // also on a machine under load (3 s before: a read slowed past the delay's end would find the listener closed)
    env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'info' }, { SHUTDOWN_DELAY_S: '10' });
    cli('seed', FIXTURE);
    apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e shutdown delay').trim();
    // on a port the system picks as it binds (PORT=0), its URL read from what it prints: a port found free first and
    // bound by the child next could be taken in between
    ({ serve, url } = await startServeOnAnyPort(env));
  }, TIMEOUT);

  afterAll(async () => {
    await serve?.kill();
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('turns /readyz to 503 at once, serves the API until the delay ends, then stops and exits 0', async () => {
    expect(serve!.output()).toContain(`listening on ${url}`);
    expect(await get('/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
    serve!.child.kill('SIGTERM');

    let readiness = await get('/readyz');
    for (let i = 0; i < 100 && readiness.status === 200; i++) readiness = await get('/readyz');
    expect(readiness).toEqual({ status: 503, body: { status: 'not ready', checks: { server: 'stopping' } } });
    // still serving: a load balancer that has not seen the 503 yet loses nothing
    const accounts = await get('/api/v1/business-accounts/', { 'x-api-key': apiKey });
    expect(accounts.status).toBe(200);
    expect((accounts.body as { apiKeyName: string }).apiKeyName).toBe('e2e shutdown delay');
    expect(serve!.child.exitCode).toBeNull();

    expect((await serve!.exited).code).toBe(0);
    expect(serve!.output()).toContain('"msg":"not ready: serving on until the shutdown delay ends"');
    await expect(fetch(`${url}/readyz`)).rejects.toThrow();
  }, TIMEOUT);
});
