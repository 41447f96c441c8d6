import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type CliProcess, runCli, startServeOnAnyPort } from '../support/cli-process';
import { describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// SIGTERM while a bulk send dispatches and its client webhooks are being delivered (the built CLI; a fake Graph API
// and a client webhook receiver, both a little slow, run by the test). After a restart the bulk finishes: the
// provider got each recipient exactly once, every recipient is `sent` (none interrupted: the stop was graceful) and
// the receiver got every `message.sent` exactly once.

const FIXTURE = join(ROOT, 'test/fixtures/example-fixture.json');
const PHONE_NUMBER_ID = '109876543210001';
const RECIPIENTS = 80;
const TIMEOUT = 240_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A server that answers every request after `delayMs`, through `answer`. */
async function slowServer(delayMs: number, answer: (body: string, headers: Record<string, unknown>) => { status: number; body: string }): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const { status, body } = answer(raw, req.headers);
      setTimeout(() => res.writeHead(status, { 'content-type': 'application/json' }).end(body), delayMs);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, port: (server.address() as { port: number }).port };
}

const d = describeWithBuiltCli('shutdown bulk and webhooks suite');

d('serve: SIGTERM during a bulk dispatch and webhook deliveries (built CLI)', () => {
  let db: TestDatabase;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let url: string;
  let apiKey: string;
  let serve: CliProcess | undefined;
  const providerCalls = new Map<string, number>();
  const webhookHits = new Map<string, number>();
  let graph: { server: Server; port: number };
  let receiver: { server: Server; port: number };

  const cli = (...args: string[]) => runCli(env, args);
  const api = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${url}${path}`, { ...init, headers: { 'content-type': 'application/json', 'x-api-key': apiKey, ...(init.headers ?? {}) } });
    return { status: res.status, body: (await res.json()) as any };
  };
  const startServe = async () => {
    // on a port the system picks as it binds, its URL read from what it prints (a port found free first could be
    // taken before the child bound it): each start has its own URL
    ({ serve, url } = await startServeOnAnyPort(env));
  };
  const until = async (what: string, done: () => boolean | Promise<boolean>) => {
    for (let i = 0; i < 1200; i++) {
      if (await done()) return;
      await sleep(100);
    }
    throw new Error(`never: ${what}`);
  };

  beforeAll(async () => {
    let n = 0;
    graph = await slowServer(40, (body) => {
      const to = JSON.parse(body).to as string;
      providerCalls.set(to, (providerCalls.get(to) ?? 0) + 1);
      return { status: 200, body: JSON.stringify({ messages: [{ id: `wamid.BULK${to}.${++n}` }] }) };
    });
    receiver = await slowServer(40, (body, headers) => {
      const id = String(headers['webhook-id']);
      if (JSON.parse(body).type === 'message.sent') webhookHits.set(id, (webhookHits.get(id) ?? 0) + 1);
      return { status: 204, body: '' };
    });
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-bulk-review4-'));
    env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'warn' }, {
      PROVIDER: 'cloud-api',
      PROVIDER_BASE_URL: `http://127.0.0.1:${graph.port}`,
      PROVIDER_ACCESS_TOKEN: 'e2e-token',
      WEBHOOKS_ALLOW_HTTP: 'true',
      WEBHOOKS_ALLOW_PRIVATE_URLS: 'true',
    });
    cli('seed', FIXTURE);
    apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e bulk').trim();
  }, TIMEOUT);

  afterAll(async () => {
    await serve?.kill();
    for (const s of [graph?.server, receiver?.server]) {
      s?.closeAllConnections();
      await new Promise((ok) => s?.close(ok));
    }
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('after the restart: each recipient sent once and `sent`, each message.sent received once', async () => {
    await startServe();
    const endpoint = await api('/api/v1/webhook-endpoints/', {
      method: 'POST', body: JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hooks`, event_types: ['message.sent'] }),
    });
    expect(endpoint.status).toBe(201);
    const recipients = Array.from({ length: RECIPIENTS }, (_, i) => ({
      phone: `+5491166${String(i).padStart(6, '0')}`,
      variables: { patient_name: `P${i}`, appointment_at: '2026-03-02T09:30:00-03:00' },
    }));
    const bulk = await api('/api/v1/platform-templates/send-bulk/', {
      method: 'POST', body: JSON.stringify({ phone_number_id: PHONE_NUMBER_ID, template_name: 'appointment_reminder', recipients }),
    });
    expect(bulk.status).toBe(202);
    const bulkId = bulk.body.bulk_send_id as string;

    await until('dispatch and deliveries under way', () => providerCalls.size >= 10 && webhookHits.size >= 3);
    const atStop = { sent: providerCalls.size, received: webhookHits.size };
    expect(await serve!.stop()).toBe(0);
    expect(atStop.sent).toBeLessThan(RECIPIENTS); // the stop came mid-dispatch

    await startServe();
    await until('the bulk finished', async () => ['COMPLETED', 'PARTIAL', 'FAILED'].includes((await api(`/api/v1/platform-templates/bulk-sends/${bulkId}/`)).body.status));
    await until('every message.sent received', () => webhookHits.size >= RECIPIENTS);
    await sleep(1000); // a duplicate, if any, would arrive now

    const statuses: Record<string, number> = {};
    for (let next: string | null = `/api/v1/platform-templates/bulk-sends/${bulkId}/messages/?page_size=100`; next;) {
      const page = await api(next.replace(url, ''));
      for (const m of page.body.results as Array<{ status: string }>) statuses[m.status] = (statuses[m.status] ?? 0) + 1;
      next = page.body.next;
    }
    expect(statuses).toEqual({ sent: RECIPIENTS });
    expect(providerCalls.size).toBe(RECIPIENTS);
    expect([...providerCalls.values()].filter((n) => n !== 1)).toEqual([]);
    expect(webhookHits.size).toBe(RECIPIENTS);
    expect([...webhookHits.values()].filter((n) => n !== 1)).toEqual([]);
    expect(await serve!.stop()).toBe(0);
  }, TIMEOUT);
});
