import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BUILT_CLI } from '../support/e2e-server';
import { eventually, sendsFixture, SHOP } from '../support/sends';
import { call, MP_ANON_SECRET, MP_PEPPER, startCluster, type Cluster, type ServeProcess } from '../support/multi-process';

// Review 15a: two `serve` processes (main.ts's wiring each) on one database, behind an imagined load balancer: API keys
// issued and revoked by the CLI (a third process), Idempotency-Key repeats landing on the other process (completed
// and in flight), and the rate limit shared by both.

const UPSERT = '/api/v1/external/contacts/upsert/';
const HOURS = '/api/v1/business-hours/';

/** A CLI command run to its end, without blocking this process's event loop: the two serve processes live in it. */
async function cli(c: Cluster, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'silent', DATABASE_URL: c.db.url, ANONYMIZATION_SECRET: MP_ANON_SECRET, API_KEY_PEPPER: MP_PEPPER };
  return promisify(execFile)(process.execPath, [BUILT_CLI, ...args], { env, encoding: 'utf8' });
}

describe('review 15a: keys and Idempotency-Key across serve processes', () => {
  let c: Cluster;
  let A: ServeProcess;
  let B: ServeProcess;

  beforeAll(async () => {
    c = await startCluster(['A', 'B'], { proxied: ['B'] });
    [A, B] = c.processes;
    const { seedFixture } = A.load('../../src/commands/provisioning/seed');
    await seedFixture(A.runtime.services, sendsFixture(), { actor: 'test' });
  }, 120_000);
  afterEach(() => c.proxies.get('B')!.release());
  afterAll(async () => {
    await c?.close();
  });

  const statusWith = async (p: ServeProcess, key: string) => (await call(p, 'GET', HOURS, { key })).status;

  it('a key B refused (a cached miss) and then provisioned, later revoked by the CLI: B follows its notifications', async () => {
    // B's runner stopped: the process whose runner applies a key change drops its whole key cache at once
    await B.runtime.services.runner.stop();
    const proxy = c.proxies.get('B')!;
    const key = 'sbk_rotated301cccccccccccccccccccccc';
    expect(await statusWith(B, key)).toBe(401);
    expect(await statusWith(B, key)).toBe(401); // now a cached miss in B
    proxy.hold();
    const fixture = sendsFixture();
    fixture.companies[0].apiKeys.push({ name: 'rotated', key, userId: 71, active: true, expiresAt: null });
    const { seedFixture } = A.load('../../src/commands/provisioning/seed');
    await seedFixture(A.runtime.services, fixture, { actor: 'test' });
    expect(await statusWith(A, key)).toBe(200);
    expect([401, 200]).toContain(await statusWith(B, key)); // B's cached miss until the notification arrives (or a bypassed cache)
    proxy.release();
    expect(await eventually(() => statusWith(B, key), 200)).toBe(200);

    // revoked while B's notification is held: B accepts the key until the notification arrives
    const listed = (await cli(c, ['keys', 'list', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
    const keyId = listed.find((k: any) => k.name === 'rotated').keyId;
    proxy.hold();
    await cli(c, ['keys', 'revoke', keyId]);
    expect(await eventually(() => statusWith(A, key), 401)).toBe(401);
    expect([200, 401]).toContain(await statusWith(B, key)); // accepted until the notification arrives (or a bypassed cache)
    proxy.release();
    expect(await eventually(() => statusWith(B, key), 401)).toBe(401);
    expect(await statusWith(A, key)).toBe(401);
    await B.runtime.services.runner.start();
  });

  it('a keyed upsert answered by A is replayed by B; the same key with another body on B is 422', async () => {
    const headers = { 'idempotency-key': 'mp-upsert-1' };
    const body = { phone: '+5491166099001', full_name: 'Keyed' };
    const first = await call(A, 'POST', UPSERT, { key: SHOP.key, body, headers });
    expect(first.status).toBe(201);
    const again = await call(B, 'POST', UPSERT, { key: SHOP.key, body, headers });
    expect([again.status, again.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    expect(again.body).toEqual(first.body);
    const other = await call(B, 'POST', UPSERT, { key: SHOP.key, body: { ...body, full_name: 'Other' }, headers });
    expect(other.status).toBe(422);
  });

  it('a keyed send answered by A is replayed by B (same message), another body under its key is 422', async () => {
    const headers = { 'idempotency-key': 'mp-send-1' };
    const body = { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'es', recipient_phone: '+5491177055551' };
    const first = await call(A, 'POST', '/api/v1/platform-templates/send/', { key: SHOP.key, body, headers });
    expect(first.status).toBe(200);
    const again = await call(B, 'POST', '/api/v1/platform-templates/send/', { key: SHOP.key, body, headers });
    expect([again.status, again.body.message_id]).toEqual([200, first.body.message_id]);
    const other = await call(B, 'POST', '/api/v1/platform-templates/send/', { key: SHOP.key, body: { ...body, recipient_phone: '+5491177055561' }, headers });
    expect(other.status).toBe(422);
  });

  it('a repeat on B while A still runs the request waits, answers 409 with Retry-After, and replays once A answered', async () => {
    // A's upsert waits for its read model (read-your-writes) while a transaction holds the event log back
    const blocker = await c.db.pool.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT txid_current()');
      const headers = { 'idempotency-key': 'mp-upsert-in-flight' };
      const body = { phone: '+5491166099002', full_name: 'In flight' };
      const first = call(A, 'POST', UPSERT, { key: SHOP.key, body, headers });
      await eventually(async () => (await c.db.pool.query(`SELECT count(*)::int AS n FROM public.idempotency_keys WHERE key = $1`, [headers['idempotency-key']])).rows[0].n, 1);
      const repeat = await call(B, 'POST', UPSERT, { key: SHOP.key, body, headers });
      expect(repeat.status).toBe(409);
      expect(Number(repeat.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      await blocker.query('COMMIT');
      const answered = await first;
      expect(answered.status).toBe(201);
      const replay = await call(B, 'POST', UPSERT, { key: SHOP.key, body, headers });
      expect([replay.status, replay.headers.get('idempotent-replayed'), replay.body]).toEqual([201, 'true', answered.body]);
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      blocker.release();
    }
  }, 30_000);
});

describe('review 15a: the rate limit is shared by the serve processes', () => {
  let c: Cluster;

  beforeAll(async () => {
    c = await startCluster(['A', 'B'], { env: { RATE_LIMIT_PER_MINUTE: '20' } });
    const { seedFixture } = c.processes[0].load('../../src/commands/provisioning/seed');
    await seedFixture(c.processes[0].runtime.services, sendsFixture(), { actor: 'test' });
  }, 120_000);
  afterAll(async () => {
    await c?.close();
  });

  it('requests alternating between A and B count together: once the key used its 20, both refuse', async () => {
    const [A, B] = c.processes;
    let admitted = 0;
    for (let i = 0; i < 20; i++) if ((await call(i % 2 ? B : A, 'GET', HOURS, { key: SHOP.key })).status === 200) admitted++;
    // each process alone admitted at most 10 of the 20: both refuse only once they see each other's counts
    expect(await eventually(async () => [(await call(A, 'GET', HOURS, { key: SHOP.key })).status, (await call(B, 'GET', HOURS, { key: SHOP.key })).status], [429, 429]))
      .toEqual([429, 429]);
    expect(admitted).toBeGreaterThan(0);
  });
});
