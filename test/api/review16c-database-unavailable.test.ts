// Review 16c (2026-11-28): what a client gets when the service's Postgres is unavailable (docs/conventions.md,
// "When the database is unavailable"). Before, every such request answered 500 "internal server error".
//  - Postgres could not be reached, or a read lost its connection, or any request failed before its handler ran:
//    503 DATABASE_UNAVAILABLE with Retry-After, in the route's error shape, nothing done.
//  - A command whose handler ran (it may have written): 500, its message saying the outcome is unknown and what an
//    Idempotency-Key does for the retry.
//  - The body never names the backend (host, port, the driver's text); /readyz unchanged.
// Real Postgres (the run's, behind a TCP proxy of this file that can refuse: its listener closed, its connections cut,
// as a stopped server), real pg and pg-pool, the real app (services wired as test/support/services.ts wires them).
// How pg and pg-pool report each failure: test/api/review16c-pg-failures.test.ts.
import { randomBytes } from 'node:crypto';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { Client, type Pool } from 'pg';
import pino from 'pino';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { loadConfig } from '../../src/config';
import { buildApp } from '../../src/http/app';
import { DATABASE_UNAVAILABLE_MESSAGE } from '../../src/http/errors';
import { assembleServices } from '../../src/main';
import { httpLoggerOptions } from '../../src/observability/logging';
import type { SendTemplateRequest } from '../../src/ports/provider';
import type { Services } from '../../src/services';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { TEST_ANON_SECRET, TEST_PEPPER } from '../support/services';
import { invoiceVariables, SHOP, sendsFixture, waitUntil } from '../support/sends';

/** A TCP proxy to Postgres that can refuse like a stopped server: listener closed (ECONNREFUSED), connections cut. */
class SwitchableProxy {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly host: string, private readonly targetPort: number) {}

  async up(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined).on('close', () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((ok, fail) => server.once('error', fail).listen(this.port, '127.0.0.1', () => ok()));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /** nothing listens on the port any more, and every connection made through it is cut */
  async refuse(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const closed = server ? new Promise((ok) => server.close(ok)) : Promise.resolve();
    for (const s of this.sockets) s.destroy();
    await closed;
  }
}

const SEND = '/api/v1/platform-templates/send/';
const UPSERT = '/api/v1/external/contacts/upsert/';
/** keys of SHOP never used before the outage: their lookup is the request's first statement (no cached key) */
const freshKey = (n: number) => `sbk_r16cfresh${String(n).padStart(2, '0')}${'c'.repeat(21)}`;
const FRESH_KEYS = [1, 2, 3, 4, 5, 6].map(freshKey);
const GLOBAL_KEY = `sbk_global_r16c${'d'.repeat(24)}`;
/** the provider double (the only fake: behind the provider port): records each request; `onSend` runs inside the call */
const provider = {
  kind: 'test' as const,
  requests: [] as SendTemplateRequest[],
  onSend: undefined as undefined | (() => Promise<void>),
  async sendTemplate(request: SendTemplateRequest) {
    this.requests.push(request);
    const hook = this.onSend;
    this.onSend = undefined;
    await hook?.();
    return { providerMessageId: `wamid.r16c.${this.requests.length}` };
  },
};
const invoice = (recipient: string) => ({
  phone_number_id: SHOP.number.phoneNumberId, template_name: 'invoice_ready', language: 'es', recipient_phone: recipient,
  variables: invoiceVariables, button_variables: { button_0: 'F-0001' },
});

describe('review16c: requests when Postgres is unavailable', () => {
  let db: TestDatabase;
  let proxy: SwitchableProxy;
  let pools: Pool[];
  let services: Services;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let base: string;
  const logged: any[] = [];
  const stream = new Writable({ write(chunk, _e, done) { for (const l of String(chunk).split('\n').filter(Boolean)) logged.push(JSON.parse(l)); done(); } });
  /** what a body must never show: the backend's address and the driver's own words */
  let secrets: string[];

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 5 });
    const target = new URL(db.url);
    proxy = new SwitchableProxy(target.hostname, Number(target.port || 5432));
    await proxy.up();
    const viaProxy = new URL(db.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const url = viaProxy.toString();
    secrets = ['127.0.0.1', String(proxy.port), target.port, target.hostname, 'ECONNREFUSED', 'terminat', 'postgres', 'connect '];
    const config = loadConfig({
      DATABASE_URL: url, ANONYMIZATION_SECRET: TEST_ANON_SECRET, API_KEY_PEPPER: TEST_PEPPER, SANDBOX_DELIVERY: 'off',
      LOG_LEVEL: 'silent', PROVIDER_APP_SECRET: 'test-app-secret', PROVIDER_VERIFY_TOKEN: 'test-verify-token',
    });
    const pool = createPool(url, 20);
    const exportPool = createPool(url, config.export.maxConcurrent);
    const idempotencyPool = createPool(url, 4, { asyncCommit: true });
    pools = [pool, exportPool, idempotencyPool];
    services = assembleServices({
      config, secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER },
      pool, exportPool, idempotencyPool, store: new PostgresEventStore(pool), transport: new InProcessTransport(),
      logger: pino({ level: 'silent' }), provider,
    });
    await services.runner.start();
    const fixture = sendsFixture();
    fixture.companies[0].apiKeys.push(...FRESH_KEYS.map((key, i) => ({ name: `fresh ${i}`, key, userId: 71, active: true, expiresAt: null })));
    fixture.globalKeys = [{ name: 'r16c global', key: GLOBAL_KEY, active: true, expiresAt: null }];
    await seedFixture(services, fixture, { actor: 'test' });
    app = await buildApp(services, { logger: httpLoggerOptions('warn', stream) });
    await app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await proxy?.up().catch(() => undefined);
    await app?.close();
    await services?.runner.stop();
    await services?.store.close();
    for (const p of pools ?? []) await p.end().catch(() => undefined);
    await proxy?.refuse();
    await db?.drop();
  });

  const call = async (method: string, path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...(key ? { 'x-api-key': key } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, retryAfter: res.headers.get('retry-after'), text, json: text ? JSON.parse(text) : undefined };
  };
  const expectNoSecrets = (text: string) => {
    for (const s of secrets) expect(text.toLowerCase()).not.toContain(s.toLowerCase());
  };
  /** the app answers with the database again (the API-key and read-model connections are made anew) */
  const untilServing = () => waitUntil(async () => (await call('GET', '/readyz', null)).status === 200, 30_000, 'the app to be ready again');

  describe('the database refused (stopped: nothing listens, every connection cut)', () => {
    beforeAll(async () => {
      expect((await call('GET', '/api/v1/business-info/', SHOP.key)).status).toBe(200);
      await proxy.refuse();
    });
    afterAll(async () => {
      await proxy.up();
      await untilServing();
    });

    it('a GET answers 503 DATABASE_UNAVAILABLE with Retry-After, in its shape, naming no backend', async () => {
      const res = await call('GET', '/api/v1/business-info/', FRESH_KEYS[0]);
      expect(res.status).toBe(503);
      expect(res.retryAfter).toBe('5');
      expect(res.json).toEqual({ error: DATABASE_UNAVAILABLE_MESSAGE });
      expectNoSecrets(res.text);
    });

    it('each route family answers it in its own error shape (export, detail, fields routes)', async () => {
      const exported = await call('GET', '/api/v1/qualitative-export/messages?company_id=301&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z', GLOBAL_KEY);
      expect([exported.status, exported.retryAfter, exported.json]).toEqual([503, '5', { error: { code: 'DATABASE_UNAVAILABLE', message: DATABASE_UNAVAILABLE_MESSAGE } }]);
      const detail = await call('GET', `/api/v1/platform-templates/bulk-sends/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}/`, FRESH_KEYS[1]);
      expect([detail.status, detail.retryAfter, detail.json]).toEqual([503, '5', { error: DATABASE_UNAVAILABLE_MESSAGE }]);
      for (const r of [exported, detail]) expectNoSecrets(r.text);
    });

    it('a POST send answers 503 (nothing was done); once the database is back nothing of it is recorded', async () => {
      const recipient = '+5491155550161';
      const res = await call('POST', SEND, FRESH_KEYS[2], invoice(recipient));
      expect(res.status).toBe(503);
      expect(res.retryAfter).toBe('5');
      expect(res.json).toEqual({ error: DATABASE_UNAVAILABLE_MESSAGE });
      expectNoSecrets(res.text);
      // with an Idempotency-Key too (the key's claim could not be made either)
      const keyed = await call('POST', UPSERT, FRESH_KEYS[3], { phone: '+5491155550162', full_name: 'Nadie' }, { 'idempotency-key': 'r16c-refused-1' });
      expect([keyed.status, keyed.retryAfter, keyed.json]).toEqual([503, '5', { error: DATABASE_UNAVAILABLE_MESSAGE }]);

      await proxy.up();
      await untilServing();
      expect(provider.requests.filter((r) => r.to === recipient)).toEqual([]);
      const recorded = await db.pool.query(
        `SELECT count(*)::int AS n FROM es.events WHERE data->>'recipientPhone' = $1 OR data->>'phone' = $2`, [recipient, '+5491155550162']);
      expect(recorded.rows[0].n).toBe(0);
      // the same requests again, now answered
      expect((await call('POST', SEND, FRESH_KEYS[2], invoice(recipient))).status).toBe(200);
      expect((await call('POST', UPSERT, FRESH_KEYS[3], { phone: '+5491155550162', full_name: 'Nadie' }, { 'idempotency-key': 'r16c-refused-1' })).status).toBe(201);
      await proxy.refuse();
    });

    it('/readyz is unchanged: not ready, "see the server log", no address', async () => {
      const res = await call('GET', '/readyz', null);
      expect(res.status).toBe(503);
      expect(res.json).toEqual({ status: 'not ready', checks: { database: 'failing: see the server log', eventStore: 'failing: see the server log' } });
      expectNoSecrets(res.text);
    });

    it('the cause is logged at warn (never as an unhandled error), throttled per kind', async () => {
      const before = logged.length;
      const answers = [];
      for (const key of [FRESH_KEYS[4], FRESH_KEYS[5]]) answers.push((await call('GET', '/api/v1/holidays/', key)).status);
      expect(answers).toEqual([503, 503]);
      const lines = logged.filter((l) => l.msg === 'database unavailable: answered 503');
      expect(lines.length).toBeGreaterThan(0);
      for (const l of lines) {
        expect(l.level).toBe(40);
        expect(l.err.code).toBe('ECONNREFUSED');
        expect(typeof l.notLoggedSinceLast).toBe('number');
      }
      // at most one line per request, and never the 500's "unhandled error"
      expect(logged.slice(before).filter((l) => l.msg === 'database unavailable: answered 503').length).toBeLessThanOrEqual(answers.length);
      expect(logged.filter((l) => l.msg === 'unhandled error')).toEqual([]);
    });
  });

  it('an unkeyed send whose database is refused after the provider accepted it answers 500, outcome unknown (not 503)', async () => {
    // the send calls the provider before its first write: a refused connection then is no proof that nothing was done
    const recipient = '+5491155550181';
    provider.onSend = () => proxy.refuse();
    const res = await call('POST', SEND, SHOP.key, invoice(recipient));
    await proxy.up();
    await untilServing();
    expect(res.status).toBe(500);
    expect(res.retryAfter).toBeNull();
    expect(res.json).toEqual({
      error: 'the database became unavailable while the request ran, after it may have made changes: its outcome is unknown. '
        + 'Check its outcome before sending it again: a request sent with an Idempotency-Key can be sent again safely with the same key.',
    });
    expectNoSecrets(res.text);
    // the provider has the message: a client told "nothing was done" would have sent it twice
    expect(provider.requests.filter((r) => r.to === recipient)).toHaveLength(1);
  });

  describe('a connection lost under a statement (its backend terminated)', () => {
    // the locker holds the locks in its transaction; the watcher looks for their waiters outside any transaction (in
    // one, pg_stat_activity is a snapshot taken at its first read: a waiter that came later would never show)
    let locker: Client;
    let watcher: Client;
    beforeAll(async () => {
      locker = new Client({ connectionString: db.url });
      watcher = new Client({ connectionString: db.url });
      await locker.connect();
      await watcher.connect();
    });
    afterAll(async () => {
      await locker.end();
      await watcher.end();
    });

    /** holds ACCESS EXCLUSIVE on every table of the read model's schemas, runs `request`, and terminates each backend
     * of the service that waits for those locks until the request is answered */
    const cutUnder = async <T>(schemaPrefix: string, request: () => Promise<T>): Promise<T> => {
      await locker.query('BEGIN');
      const tables = await locker.query<{ t: string }>(
        `SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname LIKE $1`, [`${schemaPrefix}%`]);
      expect(tables.rows.length).toBeGreaterThan(0);
      await locker.query(`LOCK TABLE ${tables.rows.map((r) => r.t).join(', ')} IN ACCESS EXCLUSIVE MODE`);
      let answered = false;
      const pending = request().finally(() => {
        answered = true;
      });
      let terminated = 0;
      try {
        await waitUntil(async () => {
          if (answered) return true;
          const r = await watcher.query<{ n: number }>(
            `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> $1 AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`,
            [(locker as unknown as { processID: number }).processID]);
          terminated += r.rows[0].n;
          return false;
        }, 30_000, 'the request to be answered');
      } finally {
        await locker.query('ROLLBACK');
      }
      expect(terminated).toBeGreaterThan(0);
      return pending;
    };

    it('a GET answers 503 DATABASE_UNAVAILABLE (a read is safe to repeat)', async () => {
      const res = await cutUnder('rm_sends', () => call('GET', '/api/v1/platform-templates/messages/wamid.r16c-unknown/', SHOP.key));
      expect(res.status).toBe(503);
      expect(res.retryAfter).toBe('5');
      expect(res.json).toEqual({ error: DATABASE_UNAVAILABLE_MESSAGE });
      expectNoSecrets(res.text);
      expect((await call('GET', '/api/v1/platform-templates/messages/wamid.r16c-unknown/', SHOP.key)).status).toBe(404);
    });

    it('a POST whose handler ran answers 500: outcome unknown, and what an Idempotency-Key does', async () => {
      const plain = await cutUnder('rm_contacts', () => call('POST', UPSERT, SHOP.key, { phone: '+5491155550171', full_name: 'Uno' }));
      expect(plain.status).toBe(500);
      expect(plain.retryAfter).toBeNull();
      expect(plain.json).toEqual({
        error: 'the database became unavailable while the request ran, after it may have made changes: its outcome is unknown. '
          + 'Check its outcome before sending it again: a request sent with an Idempotency-Key can be sent again safely with the same key.',
      });
      expectNoSecrets(plain.text);

      const headers = { 'idempotency-key': `r16c-${randomBytes(4).toString('hex')}` };
      const body = { phone: '+5491155550172', full_name: 'Dos' };
      const keyed = await cutUnder('rm_contacts', () => call('POST', UPSERT, SHOP.key, body, headers));
      expect(keyed.status).toBe(500);
      expect(keyed.json).toEqual({
        error: 'the database became unavailable while the request ran, after it may have made changes: its outcome is unknown. '
          + 'Send it again with the same Idempotency-Key: it takes effect at most once.',
      });
      expectNoSecrets(keyed.text);
      // what the message promises: the retry under the key creates the contact once
      const again = await call('POST', UPSERT, SHOP.key, body, headers);
      expect(again.status).toBe(201);
      const replay = await call('POST', UPSERT, SHOP.key, body, headers);
      expect([replay.status, replay.json]).toEqual([201, again.json]);

      const lines = logged.filter((l) => l.msg === 'database unavailable under a command: answered 500, outcome unknown');
      expect(lines.slice(-2).map((l) => [l.level, l.err.code])).toEqual([[40, '57P01'], [40, '57P01']]);
    });

    it('a route without an Idempotency-Key (webhook endpoint PATCH) says to check the outcome', async () => {
      const res = await cutUnder('rm_webhooks', () => call('PATCH', '/api/v1/webhook-endpoints/00000000-0000-4000-8000-000000000000/', SHOP.key, { description: 'x' }));
      expect(res.status).toBe(500);
      expect(res.json).toEqual({
        error: 'the database became unavailable while the request ran, after it may have made changes: its outcome is unknown. Check its outcome before sending it again.',
      });
    });
  });
});
