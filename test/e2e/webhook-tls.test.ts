import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { HOOKS_TLS, TEST_CA_FILE, UNTRUSTED_TLS } from '../support/tls';
import { startReceiver } from '../support/webhook-receiver';
import { type CliProcess, startServeOnAnyPort } from '../support/cli-process';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// Client webhooks over https from the built CLI, as production runs them (docs/webhooks.md, "Safety"): plain http
// is not allowed (no WEBHOOKS_ALLOW_HTTP), only loopback is (the receivers are on 127.0.0.1), and the operator
// trusts a private certificate authority the standard way, NODE_EXTRA_CA_CERTS. An endpoint whose certificate
// chains to it gets its events, signed; one with a self-signed certificate gets nothing, and its attempts say why.

const FIXTURE = join(ROOT, 'test/fixtures/example-fixture.json');
const TIMEOUT = 120_000;

const d = describeWithBuiltCli('webhook TLS suite');

d('client webhooks over https (built CLI, NODE_EXTRA_CA_CERTS)', () => {
  let db: TestDatabase;
  let dataDir: string;
  let trusted: Awaited<ReturnType<typeof startReceiver>>;
  let selfSigned: Awaited<ReturnType<typeof startReceiver>>;
  let serve: CliProcess | undefined;
  let url: string;
  let apiKey: string;

  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${url}${path}`, { method, headers: { 'x-api-key': apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

  const waitFor = async <T>(probe: () => Promise<T | false | undefined>, what: string): Promise<T> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const v = await probe();
      if (v) return v;
      if (serve?.child.exitCode !== null) throw new Error(`serve exited with ${serve?.child.exitCode}: ${serve?.output()}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${serve?.output().slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  beforeAll(async () => {
    trusted = await startReceiver({ tls: HOOKS_TLS });
    selfSigned = await startReceiver({ tls: UNTRUSTED_TLS });
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-webhook-tls-'));
    const env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'info' }, {
      WEBHOOKS_ALLOW_PRIVATE_URLS: 'true',
      NODE_EXTRA_CA_CERTS: TEST_CA_FILE,
    });
    const cli = (...args: string[]) => {
      const r = spawnSync(process.execPath, [CLI, ...args], { env, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`switchboard ${args.join(' ')} exited with ${r.status}: ${r.stderr}`);
      return r.stdout;
    };
    cli('seed', FIXTURE);
    apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e webhook tls').trim();
    // on a port the system picks as it binds (PORT=0), its URL read from what it prints: a port found free first and
    // bound by the child next could be taken in between
    ({ serve, url } = await startServeOnAnyPort(env));
    await waitFor(() => fetch(`${url}/healthz`).then((r) => r.status === 200, () => false), 'serve to start');
  }, TIMEOUT);

  afterAll(async () => {
    if (serve && serve.child.exitCode === null) await serve.stop('SIGTERM');
    await trusted?.close();
    await selfSigned?.close();
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('an https endpoint signed by the trusted CA gets its events, signed; plain http is refused at registration', async () => {
    const http = await api('POST', '/api/v1/webhook-endpoints/', { url: trusted.url('/crm').replace('https:', 'http:'), event_types: ['message.sent'] });
    expect(http.status).toBe(400);
    expect(await http.json()).toEqual({ error: expect.stringContaining('url must use https') });

    const created = await api('POST', '/api/v1/webhook-endpoints/', { url: trusted.url('/crm'), event_types: ['message.sent'] });
    expect(created.status).toBe(201);
    const endpoint = (await created.json()) as { id: string; secret: string };
    expect((await api('POST', `/api/v1/webhook-endpoints/${endpoint.id}/test/`)).status).toBe(202);

    const [received] = await waitFor(async () => trusted.received.length > 0 && trusted.received, 'the test event at the https receiver');
    expect(received.path).toBe('/crm');
    expect(new Webhook(endpoint.secret).verify(received.body, received.headers as Record<string, string>)).toMatchObject({
      type: 'webhook.test', data: { endpoint_id: endpoint.id },
    });
  }, TIMEOUT);

  it("an endpoint with a self-signed certificate gets nothing; its attempt says why, and the delivery waits for a retry", async () => {
    const created = await api('POST', '/api/v1/webhook-endpoints/', { url: selfSigned.url('/untrusted'), event_types: ['message.sent'] });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    expect((await api('POST', `/api/v1/webhook-endpoints/${id}/test/`)).status).toBe(202);

    const page = await waitFor(async () => {
      const body = (await (await api('GET', `/api/v1/webhook-endpoints/${id}/deliveries/`)).json()) as { count: number; results: Array<Record<string, unknown>> };
      return body.count > 0 && body;
    }, 'the failed attempt');
    expect(page.results[0]).toMatchObject({
      event_type: 'webhook.test', status_code: null, error: expect.stringMatching(/^self-signed certificate/), next_retry_at: expect.any(String), delivery_status: 'pending',
    });
    expect(selfSigned.received).toEqual([]);
  }, TIMEOUT);
});
