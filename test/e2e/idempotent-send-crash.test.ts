import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signWebhook } from '../../src/shared/provider-webhook';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type CliProcess, startServeOnAnyPort } from '../support/cli-process';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// A keyed send survives `kill -9` (docs/sends.md, "Idempotent sends"): the built server with PROVIDER=cloud-api
// against a fake Graph API run by the test (the outside provider's only fake). The fake records the send and the
// test kills the server before the fake answers; after a restart, the fake delivers the signed `sent` status
// (with biz_opaque_callback_data) as the real provider retries webhooks; the client's retries with the same key
// end with the id the fake issued, and the provider saw exactly one send.

const FIXTURE = join(ROOT, 'test/fixtures/example-fixture.json');
const APP_SECRET = 'e2e-app-secret';
const PHONE_NUMBER_ID = '109876543210001';
const TIMEOUT = 180_000;

interface ProviderCall {
  url: string;
  body: any;
  id: string;
}

/** The outside provider: records each send, issues its id, and answers only when told (never, here). */
class FakeGraphApi {
  readonly calls: ProviderCall[] = [];
  private server!: Server;
  private waiters: Array<() => void> = [];
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let raw = '';
      req.on('data', (d) => (raw += d));
      req.on('end', () => {
        if (req.method !== 'POST' || !/^\/v[\d.]+\/\d+\/messages$/.test(req.url ?? '')) {
          res.writeHead(404).end();
          return;
        }
        this.calls.push({ url: req.url!, body: JSON.parse(raw), id: `wamid.E2E${String(this.calls.length + 1).padStart(4, '0')}` });
        for (const w of this.waiters.splice(0)) w();
        // no answer: the server is killed while the provider has accepted the message
      });
    });
    await new Promise<void>((ok) => this.server.listen(0, '127.0.0.1', ok));
    this.port = (this.server.address() as { port: number }).port;
  }

  nextCall(): Promise<void> {
    return new Promise((ok) => this.waiters.push(ok));
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((ok) => this.server.close(() => ok()));
  }
}

const d = describeWithBuiltCli('idempotent-send crash suite');

d('keyed send across kill -9 of the server (built CLI, cloud-api provider)', () => {
  let db: TestDatabase;
  let dataDir: string;
  const fake = new FakeGraphApi();
  let env: NodeJS.ProcessEnv;
  let url: string;
  let apiKey: string;
  let server: CliProcess | undefined;

  const cli = (...args: string[]) => {
    const r = spawnSync(process.execPath, [CLI, ...args], { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`switchboard ${args.join(' ')} exited with ${r.status}: ${r.stderr}`);
    return r.stdout;
  };

  // on a port the system picks as it binds (PORT=0), its URL read from what it prints (a port found free first could be
  // taken before the child bound it): each start has its own URL
  const startServe = async () => {
    const started = await startServeOnAnyPort(env);
    server = started.serve;
    url = started.url;
    const { child } = server;
    for (let i = 0; i < 300; i++) {
      if (child.exitCode !== null) throw new Error(`serve exited with ${child.exitCode}: ${server.output()}`);
      const ok = await fetch(`${url}/healthz`).then((r) => r.status === 200, () => false);
      if (ok) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`serve did not become healthy: ${server.output()}`);
  };

  const kill9 = async () => {
    const { child } = server!;
    const exited = new Promise<NodeJS.Signals | null>((ok) => child.once('exit', (_code, signal) => ok(signal)));
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    server = undefined;
  };

  const send = (key: string) =>
    fetch(`${url}/api/v1/platform-templates/send/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey, 'idempotency-key': key },
      body: JSON.stringify({
        phone_number_id: PHONE_NUMBER_ID,
        template_name: 'appointment_reminder',
        recipient_phone: '+5491155550123',
        variables: { patient_name: 'Juan', appointment_at: '2026-03-02T09:30:00-03:00' },
      }),
    });

  /** Retries with the key while the answer is "not known yet" (409 in flight: the dead claim's lease; 503: no outcome). */
  const retryWhileUnknown = async (key: string, until: (status: number) => boolean = () => false) => {
    const seen: number[] = [];
    for (let i = 0; i < 120; i++) {
      const res = await send(key);
      seen.push(res.status);
      if ((res.status !== 409 && res.status !== 503) || until(res.status)) return { res, seen };
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(`still unknown after 120 retries: ${seen.join(',')}`);
  };

  /** The provider's webhook for a status, signed with the app secret, retried until accepted (as the provider does). */
  const deliverStatus = async (call: ProviderCall, status: 'sent' | 'delivered') => {
    const body = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [{
        id: 'waba-1',
        changes: [{
          field: 'messages',
          value: {
            messaging_product: 'whatsapp',
            metadata: { display_phone_number: '5491140000001', phone_number_id: PHONE_NUMBER_ID },
            statuses: [{
              id: call.id, status, timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: call.body.to,
              biz_opaque_callback_data: call.body.biz_opaque_callback_data,
            }],
          },
        }],
      }],
    });
    for (let i = 0; i < 50; i++) {
      const res = await fetch(`${url}/webhooks/provider`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, body) }, body,
      }).catch(() => undefined);
      if (res?.status === 200) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('the webhook was never accepted');
  };

  /** Sends with the key and kills the server once the fake provider has the message (before it answers). */
  const sendAndCrash = async (key: string): Promise<ProviderCall> => {
    const before = fake.calls.length;
    const received = fake.nextCall();
    // fetch rejects with a TypeError of Node's realm, not jest's: compare the outcome, not the class
    const inFlight = send(key).then((r) => `answered ${r.status}`, () => 'connection lost');
    await received;
    await kill9();
    expect(await inFlight).toBe('connection lost'); // the client does not know the outcome
    expect(fake.calls).toHaveLength(before + 1);
    return fake.calls[before];
  };

  beforeAll(async () => {
    await fake.start();
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-crash-'));
    env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'warn' }, {
      PROVIDER: 'cloud-api',
      PROVIDER_BASE_URL: `http://127.0.0.1:${fake.port}`,
      PROVIDER_ACCESS_TOKEN: 'e2e-token',
      PROVIDER_APP_SECRET: APP_SECRET,
      PROVIDER_VERIFY_TOKEN: 'e2e-verify',
    });
    cli('seed', FIXTURE);
    apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e crash').trim();
    expect(apiKey).toMatch(/^sbk_/);
  }, TIMEOUT);

  afterAll(async () => {
    if (server) await kill9().catch(() => undefined);
    await fake.stop();
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('a send the provider accepted before the crash is answered with its id after the restart, and never sent twice', async () => {
    await startServe();
    const call = await sendAndCrash('e2e-order-1');
    expect(call.body).toMatchObject({ messaging_product: 'whatsapp', to: '5491155550123', type: 'template' });
    expect(call.body.biz_opaque_callback_data).toMatch(/^[0-9a-f-]{36}$/);

    await startServe();
    await deliverStatus(call, 'sent');
    const { res } = await retryWhileUnknown('e2e-order-1');
    expect(res.status).toBe(200);
    const answer = await res.json();
    expect(answer).toEqual({
      success: true, message_id: call.id, template_name: 'appointment_reminder', recipient_phone: '+5491155550123', status: 'sent',
      sent_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(fake.calls).toHaveLength(1);

    const record = await fetch(`${url}/api/v1/platform-templates/messages/${call.id}/`, { headers: { 'x-api-key': apiKey } });
    expect(record.status).toBe(200);
    expect(await record.json()).toMatchObject({
      template: { name: 'appointment_reminder', language: 'es' },
      recipient: { phone: '+5491155550123' },
      meta_message_id: call.id,
      was_successful: true,
      delivery_status: { current: 'sent', error_code: null },
    });
    const rows = await db.pool.query(`SELECT count(*)::int AS n FROM rm_sends.sends WHERE provider_message_id = $1`, [call.id]);
    expect(rows.rows[0].n).toBe(1);
    const again = await send('e2e-order-1');
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(answer);
    expect(fake.calls).toHaveLength(1);
  }, TIMEOUT);

  it('without any status, the retries say the outcome is not known and never call the provider again', async () => {
    if (!server) await startServe();
    const before = fake.calls.length;
    await sendAndCrash('e2e-order-2');
    await startServe();
    const { res, seen } = await retryWhileUnknown('e2e-order-2', (status) => status === 503);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(await res.json()).toEqual({
      error: 'The first attempt with this Idempotency-Key reached the provider but its outcome is not known yet; retry later.',
    });
    expect(seen.every((s) => s === 409 || s === 503)).toBe(true);
    expect(fake.calls).toHaveLength(before + 1);
  }, TIMEOUT);
});
