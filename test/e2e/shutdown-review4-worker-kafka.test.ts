import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KafkaTransport } from '../../src/adapters/kafka/transport';
import { PROVIDER_WEBHOOK_TOPIC, splitWebhook, statusWebhook } from '../../src/shared/provider-webhook';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type CliProcess, runCli, startCli, startServeOnAnyPort } from '../support/cli-process';
import { BUILT_CLI as CLI, e2eServerEnv, freePort, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// `worker` (WORKER_OPS_PORT) on a real Kafka broker, stopped by SIGTERM while it consumes provider statuses: it
// exits 0, and after a restart every status is recorded exactly once. A record whose offset had been committed
// without being applied would never come back: its status would be missing.

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const FIXTURE = join(ROOT, 'test/fixtures/example-fixture.json');
const PHONE_NUMBER_ID = '109876543210001';
const SENDS = 60;
const TIMEOUT = 240_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const d = BROKERS && existsSync(CLI) ? describe : describe.skip;
if (!BROKERS) console.warn(`worker shutdown over Kafka skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

d('worker: SIGTERM while consuming from Kafka (built CLI, real broker)', () => {
  let db: TestDatabase;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let url: string;
  let child: CliProcess | undefined;

  const cli = (...args: string[]) => runCli(env, args);
  const startWorker = async () => {
    child = startCli(['worker'], env);
    await child.untilOutput('switchboard worker started', 1800);
  };
  // on a port the system picks as it binds (PORT=0), its URL read from what it prints (a port found free first could be
  // taken before the child bound it)
  const startServe = async () => {
    ({ serve: child, url } = await startServeOnAnyPort(env, ['serve'], { tries: 1800 }));
  };
  const stop = () => child!.stop();
  const recorded = async (ids: string[]) =>
    (await db.pool.query<{ id: string; status: string; n: number }>(
      `SELECT data->>'providerMessageId' AS id, data->>'status' AS status, count(*)::int AS n FROM es.events
        WHERE type = 'DeliveryStatusRecorded' AND data->>'providerMessageId' = ANY($1) GROUP BY 1, 2`, [ids])).rows;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-worker-kafka-review4-'));
    env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'warn' }, {
      // the worker's ops listener takes no port 0 (WORKER_OPS_PORT: 1 to 65535): found free first
      KAFKA_BROKERS: BROKERS, SANDBOX_DELIVERY: 'off', WORKER_OPS_PORT: String(await freePort()),
    });
    cli('seed', FIXTURE);
  }, TIMEOUT);

  afterAll(async () => {
    await child?.kill();
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('exits 0 mid-consumption; after a restart each (message, status) is recorded exactly once', async () => {
    const apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e worker').trim();
    await startServe();
    const sent: Array<{ id: string; to: string }> = [];
    for (let i = 0; i < SENDS; i++) {
      const to = `5491177${String(i + 1001).padStart(6, '0')}`; // never ending in 0000 (the sandbox refuses those)
      const res = await fetch(`${url}/api/v1/platform-templates/send/`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
        body: JSON.stringify({ phone_number_id: PHONE_NUMBER_ID, template_name: 'appointment_reminder', recipient_phone: `+${to}`,
          variables: { patient_name: 'Ana', appointment_at: '2026-03-02T09:30:00-03:00' } }),
      });
      expect(res.status).toBe(200);
      sent.push({ id: ((await res.json()) as { message_id: string }).message_id, to });
    }
    expect(await stop()).toBe(0);

    await startWorker();
    const producer = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'e2e-review4' });
    try {
      const at = String(Math.floor(Date.now() / 1000));
      for (const status of ['delivered', 'read'] as const) {
        const records = sent.flatMap((s) => splitWebhook(statusWebhook([{ phoneNumberId: PHONE_NUMBER_ID, providerMessageId: s.id, status, timestamp: at, recipientId: s.to }]), new Date().toISOString())!);
        await producer.publish(PROVIDER_WEBHOOK_TOPIC, records);
      }
    } finally {
      await producer.close();
    }
    const ids = sent.map((s) => s.id);
    for (let i = 0; i < 2000 && (await recorded(ids)).length === 0; i++) await sleep(10);
    const atStop = (await recorded(ids)).length;
    expect(await stop()).toBe(0);
    console.log(`statuses recorded when SIGTERM was sent: ${atStop} of ${SENDS * 2}`);

    await startWorker();
    for (let i = 0; i < 600 && (await recorded(ids)).length < SENDS * 2; i++) await sleep(100);
    const rows = await recorded(ids);
    expect(rows).toHaveLength(SENDS * 2);
    expect(rows.filter((r) => r.n !== 1)).toEqual([]);
    expect(await stop()).toBe(0);
  }, TIMEOUT);
});
