import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'pg';
import { checksumProjection } from '../../src/projections/rebuild';
import { allProjections as projections } from '../../src/projections/registry';
import { signWebhook, statusWebhook } from '../../src/shared/provider-webhook';
import { EXAMPLE, SECOND, exampleFixture, secondCompany } from '../support/provisioning';
import { TEST_ANON_SECRET, TEST_PEPPER } from '../support/services';

// Fault injection with the real processes (issue #8; `npm run test:fault`, not part of `npm test`):
// `switchboard serve` + two `switchboard worker` (dist/cli.js) on a real Postgres (the run's embedded one, a fresh
// database) and a real Kafka broker this file controls. Faults: kill -9 of a worker during bulk dispatch and
// during webhook consumption, pg_terminate_backend of every app connection, Kafka broker stop + restart.
// Afterwards: one outcome event per bulk recipient, each webhook status applied once in effect, and every
// projection equal to a fresh rebuild. Bounded: every wait has a deadline; processes are always stopped.

const CLI = join(__dirname, '..', '..', 'dist', 'cli.js');
const APP_SECRET = 'fault-app-secret';
const A_NUMBER = '109876543210001'; // TIER_250: 0.24 s spacing, so the bulk is still dispatching when a worker dies
const B_NUMBER = '109876543210002'; // unlimited
const BULK_SIZE = 60;
const SENDS = 20;
const log = (m: string) => process.stderr.write(`[fault] ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const freePort = () => new Promise<number>((resolve, reject) => {
  const s = createServer();
  s.on('error', reject);
  s.listen(0, '127.0.0.1', () => {
    const { port } = s.address() as { port: number };
    s.close(() => resolve(port));
  });
});

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch { /* retried until the deadline */ }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

const brokers = process.env.TEST_KAFKA_BROKERS;
const d = brokers ? describe : describe.skip;
if (!brokers) process.stderr.write(`[fault] skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'no Kafka broker'}\n`);

d('fault injection: serve + 2 workers, kill -9, pg_terminate_backend, Kafka restart', () => {
  let broker: { brokers: string; stop(): Promise<void>; start(): Promise<void>; destroy(): Promise<void> };
  let admin: Pool;
  let pool: Pool;
  let dbName = '';
  let env: NodeJS.ProcessEnv = {};
  let base = '';
  const procs = new Set<ChildProcess>();

  const startProc = (role: 'serve' | 'worker', name: string): ChildProcess => {
    const child = spawn(process.execPath, [CLI, role], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr?.on('data', (b: Buffer) => {
      const text = b.toString();
      if (/error|fatal/i.test(text)) process.stderr.write(`[${name}] ${text.slice(0, 400)}`);
    });
    procs.add(child);
    child.on('exit', () => procs.delete(child));
    log(`started ${name} (pid ${child.pid})`);
    return child;
  };
  const kill9 = (child: ChildProcess, name: string) => {
    log(`kill -9 ${name} (pid ${child.pid})`);
    child.kill('SIGKILL');
  };
  const http = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      method, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers }, signal: AbortSignal.timeout(30_000),
    });
  const postWebhook = async (body: object) => {
    const raw = JSON.stringify(body);
    return http('POST', '/webhooks/provider', raw, { 'x-hub-signature-256': signWebhook(APP_SECRET, raw) });
  };

  beforeAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { startKafkaBroker } = require('../../scripts/kafka-broker.mjs');
    broker = await startKafkaBroker({ log });
    const serverUrl = process.env.TEST_DATABASE_URL!;
    admin = new Pool({ connectionString: serverUrl, max: 1 });
    dbName = `fault_${process.pid}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    const u = new URL(serverUrl);
    u.pathname = `/${dbName}`;
    pool = new Pool({ connectionString: u.toString(), max: 2, application_name: 'fault-harness' });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    env = {
      PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: u.toString(), KAFKA_BROKERS: broker.brokers,
      ANONYMIZATION_SECRET: TEST_ANON_SECRET, API_KEY_PEPPER: TEST_PEPPER, PORT: String(port), HOST: '127.0.0.1',
      SANDBOX_DELIVERY: 'off', PROVIDER_APP_SECRET: APP_SECRET, PROVIDER_VERIFY_TOKEN: 'fault', LOG_LEVEL: 'warn',
    };
    const doc = exampleFixture();
    doc.companies.push(secondCompany());
    const file = join(mkdtempSync(join(tmpdir(), 'switchboard-fault-')), 'fixture.json');
    writeFileSync(file, JSON.stringify(doc));
    const seed = spawnSync(process.execPath, [CLI, 'seed', file], { env, encoding: 'utf8', timeout: 120_000 });
    if (seed.status !== 0) throw new Error(`seed failed: ${seed.stderr}`);
  }, 240_000);

  afterAll(async () => {
    for (const p of procs) p.kill('SIGKILL');
    await sleep(500);
    await pool?.end();
    if (dbName) await admin?.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    await admin?.end();
    await broker?.destroy();
  }, 60_000);

  it('nothing is lost or duplicated', async () => {
    startProc('serve', 'serve');
    let w1 = startProc('worker', 'worker-1');
    let w2 = startProc('worker', 'worker-2');
    await until('serve ready', async () => (await http('GET', '/readyz')).ok, 60_000);

    // single sends on B's unlimited number: their provider ids receive the webhooks
    const messageIds: string[] = [];
    for (let i = 0; i < SENDS; i++) {
      const res = await http('POST', '/api/v1/platform-templates/send/', {
        phone_number_id: B_NUMBER, template_name: 'stock_alert', recipient_phone: `+54911477${String(i + 1).padStart(5, '0')}`, variables: { product: `p${i}` },
      }, { 'x-api-key': SECOND.key });
      expect(res.status).toBe(200);
      messageIds.push(((await res.json()) as { message_id: string }).message_id);
    }

    // fault 1: kill -9 a worker during bulk dispatch
    const bulkRes = await http('POST', '/api/v1/platform-templates/send-bulk/', {
      phone_number_id: A_NUMBER, template_name: 'appointment_reminder',
      recipients: Array.from({ length: BULK_SIZE }, (_, i) => ({
        phone: `+54911466${String(i).padStart(5, '0')}`, variables: { patient_name: `P${i}`, appointment_at: '2026-03-10T10:00:00-03:00' },
      })),
    }, { 'x-api-key': EXAMPLE.key });
    expect(bulkRes.status).toBe(202);
    const bulkId = ((await bulkRes.json()) as { bulk_send_id: string }).bulk_send_id;
    await until('bulk dispatch started', async () => {
      const r = await pool.query(`SELECT count(*)::int AS n FROM es.events WHERE type = 'BulkRecipientsDispatched' AND data->>'bulkId' = $1`, [bulkId]);
      return r.rows[0].n > 0;
    }, 60_000);
    kill9(w1, 'worker-1');
    w1 = startProc('worker', 'worker-3');

    // webhooks: delivered + read for every message, shuffled (read often before delivered), each sent twice
    const at = Math.floor(Date.now() / 1000);
    const notes = messageIds.flatMap((id, i) => (['delivered', 'read'] as const).map((status, k) => ({
      phoneNumberId: B_NUMBER, providerMessageId: id, status, timestamp: String(at + k), recipientId: `54911477${String(i + 1).padStart(5, '0')}`,
    })));
    const shuffled = [...notes, ...notes].sort(() => Math.random() - 0.5);
    const half = Math.floor(shuffled.length / 2);

    // fault 2: kill -9 a worker while it consumes webhooks
    for (const n of shuffled.slice(0, half / 2)) expect((await postWebhook(statusWebhook([n]))).status).toBe(200);
    kill9(w2, 'worker-2');
    for (const n of shuffled.slice(half / 2, half)) expect((await postWebhook(statusWebhook([n]))).status).toBe(200);
    w2 = startProc('worker', 'worker-4');

    // fault 3: terminate every backend of the app's database (serve's and the workers' pools)
    const killed = await pool.query(`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name <> 'fault-harness'`, [dbName]);
    log(`pg_terminate_backend: ${killed.rows[0].n} connections`);

    // fault 4: Kafka broker down while webhooks arrive (503s are retried, as the provider does), then back up
    log('stopping the Kafka broker');
    await broker.stop();
    const pending = shuffled.slice(half);
    const during = await Promise.all(pending.slice(0, 5).map(async (n) => (await postWebhook(statusWebhook([n])).catch(() => undefined))?.status));
    log(`webhook answers while Kafka is down: ${JSON.stringify(during)}`);
    expect(during.every((s) => s === undefined || s === 200 || s === 503)).toBe(true);
    await broker.start();
    log('Kafka broker restarted');
    for (const n of pending) {
      await until('webhook accepted', async () => (await postWebhook(statusWebhook([n]))).status === 200, 120_000);
    }

    // everything settles
    await until('bulk finished', async () => {
      const r = await http('GET', `/api/v1/platform-templates/bulk-sends/${bulkId}/`, undefined, { 'x-api-key': EXAMPLE.key });
      const b = (await r.json()) as { status: string };
      return ['COMPLETED', 'PARTIAL', 'FAILED'].includes(b.status);
    }, 180_000);
    await until('every message read', async () => {
      for (const id of messageIds) {
        const r = await http('GET', `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, undefined, { 'x-api-key': SECOND.key });
        if (((await r.json()) as { delivery_status: { current: string } }).delivery_status.current !== 'read') return false;
      }
      return true;
    }, 180_000);

    // one outcome per bulk recipient
    const outcomes = await pool.query<{ idx: number; n: number }>(
      `SELECT (r->>'index')::int AS idx, count(*)::int AS n FROM es.events e, jsonb_array_elements(e.data->'recipients') r
        WHERE e.type IN ('BulkRecipientsDispatched', 'BulkRecipientsRejected') AND e.data->>'bulkId' = $1 GROUP BY 1`, [bulkId]);
    log(`bulk: ${outcomes.rowCount} recipients with an outcome, max ${Math.max(...outcomes.rows.map((r) => r.n))} per recipient`);
    expect(outcomes.rowCount).toBe(BULK_SIZE);
    expect(outcomes.rows.filter((r) => r.n !== 1)).toEqual([]);

    // each (message, status) recorded once
    const statuses = await pool.query<{ id: string; status: string; n: number }>(
      `SELECT data->>'providerMessageId' AS id, data->>'status' AS status, count(*)::int AS n FROM es.events
        WHERE type = 'DeliveryStatusRecorded' AND data->>'providerMessageId' = ANY($1) GROUP BY 1, 2`, [messageIds]);
    expect(statuses.rowCount).toBe(SENDS * 2);
    expect(statuses.rows.filter((r) => r.n !== 1)).toEqual([]);

    // stop the processes (SIGTERM), then every projection equals a fresh rebuild
    for (const p of [...procs]) p.kill('SIGTERM');
    await until('processes exited', async () => procs.size === 0, 60_000);
    for (const p of projections) {
      const before = await checksumProjection(pool, p);
      const r = spawnSync(process.execPath, [CLI, 'projections', 'rebuild', p.name], { env, encoding: 'utf8', timeout: 120_000 });
      expect(r.status).toBe(0);
      const after = await checksumProjection(pool, p);
      log(`projection ${p.name}: ${before === after ? 'equal to a fresh rebuild' : 'DIFFERS from a fresh rebuild'}`);
      expect({ name: p.name, checksum: after }).toEqual({ name: p.name, checksum: before });
    }
  }, 600_000);
});
