import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { signWebhook, statusWebhook } from '../../src/shared/provider-webhook';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startReceiver } from '../support/webhook-receiver';
import { type CliProcess, startCli, startServeOnAnyPort } from '../support/cli-process';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// Client webhooks survive `kill -9` of the delivering process (docs/webhooks.md, "Delivery"): the built CLI
// (`serve`, then `serve` + `worker` sharing the work) with the operator setting that allows loopback endpoints,
// delivering to a real receiver on 127.0.0.1. 150 sends and their 150 `delivered` statuses (through the provider
// webhook ingress) give 300 webhook events. The receiver answers the first deliveries, then holds every answer
// back; the server is killed with deliveries in flight. Held requests are later answered 503 (not counted as
// received): an event counts only once a live process got its 2xx. After the restart every event arrives.

const FIXTURE = join(ROOT, 'test/fixtures/example-fixture.json');
const APP_SECRET = 'e2e-app-secret';
const PHONE_NUMBER_ID = '109876543210001';
const SENDS_BEFORE = 100;
const SENDS_AFTER = 50;
const ANSWERED_BEFORE_HOLD = 40;
const TIMEOUT = 240_000;

const waitFor = async <T>(probe: () => Promise<T | false | undefined> | T | false | undefined, what: string, ms = 60_000): Promise<T> => {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

const d = describeWithBuiltCli('webhook crash suite');

d('client webhooks across kill -9 of the delivering process (built CLI)', () => {
  let db: TestDatabase;
  let dataDir: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let env: NodeJS.ProcessEnv;
  let url: string;
  let apiKey: string;
  const processes: CliProcess[] = [];

  const cli = (...args: string[]) => {
    const r = spawnSync(process.execPath, [CLI, ...args], { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`switchboard ${args.join(' ')} exited with ${r.status}: ${r.stderr}`);
    return r.stdout;
  };

  const start = async (role: 'serve' | 'worker') => {
    let p: CliProcess;
    if (role === 'serve') {
      // on a port the system picks as it binds (PORT=0), its URL read from what it prints (a port found free first
      // could be taken before the child bound it): each start has its own URL
      ({ serve: p, url } = await startServeOnAnyPort(env));
    } else {
      p = startCli(['worker'], env); // a worker binds nothing (no WORKER_OPS_PORT)
    }
    processes.push(p);
    const ready = role === 'serve'
      ? () => fetch(`${url}/healthz`).then((r) => r.status === 200, () => false)
      : () => p.output().includes('worker started');
    await waitFor(async () => {
      if (p.child.exitCode !== null) throw new Error(`${role} exited with ${p.child.exitCode}: ${p.output()}`);
      return ready();
    }, `${role} to start`);
    return p;
  };

  const kill9 = async (p: { child: ChildProcess }) => {
    const exited = new Promise<NodeJS.Signals | null>((ok) => p.child.once('exit', (_code, signal) => ok(signal)));
    p.child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    processes.splice(processes.indexOf(p as CliProcess), 1);
  };

  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${url}${path}`, {
      method, headers: { 'content-type': 'application/json', 'x-api-key': apiKey }, ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  /** `count` sends (10 at a time) to fresh recipients; their provider message ids. */
  const sendMany = async (from: number, count: number): Promise<string[]> => {
    const ids: string[] = new Array(count);
    let next = 0;
    await Promise.all(Array.from({ length: 10 }, async () => {
      for (let i = next++; i < count; i = next++) {
        const res = await api('POST', '/api/v1/platform-templates/send/', {
          phone_number_id: PHONE_NUMBER_ID, template_name: 'appointment_reminder', recipient_phone: `+54911555${String(10_001 + from + i).padStart(5, '0')}`,
          variables: { patient_name: 'Juan', appointment_at: '2026-03-02T09:30:00-03:00' },
        });
        if (res.status !== 200) await new Promise((r) => setTimeout(r, 1500));
        if (res.status !== 200) throw new Error(`send ${from + i}: ${res.status} ${await res.text()}\n${processes.map((p) => p.output().slice(-3000)).join('\n')}`);
        ids[i] = ((await res.json()) as { message_id: string }).message_id;
      }
    }));
    return ids;
  };

  /** The provider's `delivered` notifications for these messages, 50 per signed webhook POST. */
  const deliverStatuses = async (ids: string[]) => {
    const at = String(Math.floor(Date.now() / 1000));
    for (let i = 0; i < ids.length; i += 50) {
      const body = JSON.stringify(statusWebhook(ids.slice(i, i + 50).map((id) => ({ phoneNumberId: PHONE_NUMBER_ID, providerMessageId: id, status: 'delivered' as const, timestamp: at, recipientId: '1' }))));
      const res = await fetch(`${url}/webhooks/provider`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, body) }, body });
      expect(res.status).toBe(200);
    }
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-webhooks-'));
    env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'info' }, {
      PROVIDER: 'sandbox',
      SANDBOX_DELIVERY: 'off',
      PROVIDER_APP_SECRET: APP_SECRET,
      PROVIDER_VERIFY_TOKEN: 'e2e-verify',
      // the operator settings that let an endpoint be a plain-http loopback address (the test's receiver)
      WEBHOOKS_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOKS_ALLOW_HTTP: 'true',
    });
    cli('seed', FIXTURE);
    apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e webhooks').trim();
    expect(apiKey).toMatch(/^sbk_/);
  }, TIMEOUT);

  afterAll(async () => {
    for (const p of [...processes]) await kill9(p).catch(() => undefined);
    await receiver?.close();
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('kill -9 mid-stream: after a restart (serve and a worker sharing the work) every event arrives, signed; 0 lost', async () => {
    // the receiver answers the first deliveries, then holds every answer until the server is dead
    let answered = 0;
    let held = 0;
    let release!: () => void;
    const released = new Promise<number>((ok) => (release = () => ok(503)));
    let holding = true;
    receiver.respond(() => {
      if (holding && answered >= ANSWERED_BEFORE_HOLD) {
        held++;
        return released;
      }
      answered++;
      return 204;
    });

    const serve = await start('serve');
    const created = await api('POST', '/api/v1/webhook-endpoints/', { url: receiver.url('/crm'), event_types: ['message.sent', 'message.delivered'] });
    expect(created.status).toBe(201);
    const endpoint = (await created.json()) as { id: string; secret: string };

    const first = await sendMany(0, SENDS_BEFORE);
    await deliverStatuses(first);
    await waitFor(() => held > 0, 'deliveries in flight at the receiver');
    await kill9(serve);
    const heldAtKill = held;
    const receivedAtKill = receiver.received.length;
    holding = false;
    release();

    // restarted: a serve process and a worker process on the same database share the queue
    await start('serve');
    await start('worker');
    const second = await sendMany(SENDS_BEFORE, SENDS_AFTER);
    await deliverStatuses(second);

    const messages = [...first, ...second];
    const expected = new Set(messages.flatMap((id) => [`message.sent ${id}`, `message.delivered ${id}`]));
    const arrived = () => new Set(receiver.received.map((r) => JSON.parse(r.body)).map((b) => `${b.type} ${b.data.meta_message_id}`));
    await waitFor(() => arrived().size >= expected.size, 'every webhook event at the receiver', 120_000);

    expect([...arrived()].sort()).toEqual([...expected].sort());
    const ids = receiver.received.map((r) => String(r.headers['webhook-id']));
    const distinct = new Set(ids);
    expect(distinct.size).toBe(2 * messages.length); // 0 lost, one stable webhook-id per event
    const queued = await db.pool.query<{ n: number }>('SELECT count(DISTINCT webhook_id)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1', [endpoint.id]);
    expect(queued.rows[0].n).toBe(2 * messages.length);

    const wh = new Webhook(endpoint.secret);
    for (const r of receiver.received) expect(wh.verify(r.body, r.headers as Record<string, string>)).toEqual(JSON.parse(r.body));

    const duplicates = ids.length - distinct.size;
    console.log(JSON.stringify({
      webhook_crash: { events: distinct.size, received_2xx: ids.length, duplicates, lost: expected.size - arrived().size, received_before_kill: receivedAtKill, held_at_kill: heldAtKill },
    }));
  }, TIMEOUT);
});
