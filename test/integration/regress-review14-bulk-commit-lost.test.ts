// Regression review 14: send-bulk's commit point (BulkSendCreated) appended, committed, and its answer lost with the
// connection (a failover, a NAT entry dropped between the commit and its acknowledgement). The creation answered 500,
// yet the bulk send existed: its draft job was promoted by the lease sweep and the bulk sent; an unkeyed client
// retrying the 500 (review 13 fixed the same for the job's promotion, one statement later) messaged everyone twice.
// The event store's pool reaches Postgres through a TCP proxy that, once armed, forwards the append of a
// BulkSendCreated, waits for the server's ReadyForQuery after it (the commit is done), and drops the connection
// instead of passing that answer on.
import net from 'node:net';
import pino from 'pino';
import type { Pool } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { createEventStorePool, createPool } from '../../src/adapters/postgres/pool';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { loadConfig } from '../../src/config';
import { assembleServices } from '../../src/main';
import type { MessagingProvider, SendTemplateRequest, SendTemplateResult } from '../../src/ports/provider';
import type { Services } from '../../src/services';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { ServedApp } from '../support/served-app';
import { TEST_ANON_SECRET, TEST_PEPPER } from '../support/services';
import { SHOP, sendsFixture, waitUntil } from '../support/sends';
import { sweepBulkLeasesNow } from '../support/bulk';

class CountingProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  readonly sandbox = new SandboxProvider({ delivery: 'off' });
  readonly calls: string[] = [];
  /** run after the provider accepted the message and before the call returns */
  during: (() => Promise<void>) | undefined;
  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    this.calls.push(request.to);
    const result = await this.sandbox.sendTemplate(request);
    if (this.during) await this.during();
    return result;
  }
  callsTo(to: string): number {
    return this.calls.filter((c) => c === to.replace(/^\+/, '') || c === to).length;
  }
}

const READY_FOR_QUERY = Buffer.from([0x5a, 0, 0, 0, 5]);

/** A TCP proxy to Postgres; armed, it drops the connection that committed an append of `marker`, answer unsent. */
function startProxy(target: { host: string; port: number }) {
  const state = { armed: false, marker: 'BulkSendCreated', dropped: 0, blackhole: false };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    // unreachable: the connection is taken and never answered (a host gone without a reset: a partition)
    if (state.blackhole) return;
    const upstream = net.connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    let watching = false;
    let seen = Buffer.alloc(0);
    client.on('data', (d) => {
      if (state.armed && d.includes(state.marker)) {
        state.armed = false;
        watching = true;
      }
      upstream.write(d);
    });
    upstream.on('data', (d) => {
      if (!watching) {
        client.write(d);
        return;
      }
      seen = Buffer.concat([seen, d]);
      if (seen.includes(READY_FOR_QUERY)) {
        // the statement ran and its implicit transaction committed: the client never hears of it
        state.dropped++;
        client.destroy();
        upstream.destroy();
      }
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  });
  return {
    state,
    async listen(): Promise<number> {
      await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
      return (server.address() as net.AddressInfo).port;
    },
    /** every connection through the proxy cut (their backends end too) */
    killAll() {
      for (const s of sockets) s.destroy();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((ok) => server.close(ok));
    },
  };
}

describe('regression review 14: send-bulk whose commit point committed, its answer lost', () => {
  let db: TestDatabase;
  let proxy: ReturnType<typeof startProxy>;
  let pools: { main: Pool; store: Pool; idempotency: Pool; export: Pool };
  let services: Services;
  let served: ServedApp | undefined;
  let base: string;
  const provider = new CountingProvider();
  const logs: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 4 });
    const u = new URL(db.url);
    proxy = startProxy({ host: u.hostname, port: Number(u.port || 5432) });
    const proxied = new URL(db.url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(await proxy.listen());
    const config = loadConfig({
      DATABASE_URL: db.url, ANONYMIZATION_SECRET: TEST_ANON_SECRET, API_KEY_PEPPER: TEST_PEPPER, SANDBOX_DELIVERY: 'off',
      LOG_LEVEL: 'silent', PROVIDER_APP_SECRET: 'test-app-secret', PROVIDER_VERIFY_TOKEN: 'test-verify-token',
    });
    pools = {
      main: createPool(db.url, 20),
      store: createEventStorePool(proxied.toString()),
      idempotency: createPool(db.url, 4, { asyncCommit: true }),
      export: createPool(db.url, config.export.maxConcurrent),
    };
    const transport = new InProcessTransport();
    services = assembleServices({
      config,
      secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER },
      pool: pools.main, exportPool: pools.export, idempotencyPool: pools.idempotency,
      store: new PostgresEventStore(pools.store), transport, logger: pino({ level: 'warn' }, { write: (l: string) => { logs.push(JSON.parse(l)); } }), provider,
    });
    served = new ServedApp(services, transport);
    base = (await served.start({ logger: false })).base;
    await seedFixture(services, sendsFixture(), { actor: 'test' });
  }, 120_000);

  afterAll(async () => {
    await served?.stop();
    for (const p of Object.values(pools ?? {})) await p.end().catch(() => undefined);
    await proxy?.close();
    await db?.drop();
  });

  it('answers 202 for the bulk it created, which is then sent once', async () => {
    const recipients = ['+5491180077001', '+5491180077002'];
    Object.assign(proxy.state, { armed: true, marker: 'BulkSendCreated' });
    const res = await fetch(`${base}/api/v1/platform-templates/send-bulk/`, {
      method: 'POST',
      headers: { 'x-api-key': SHOP.key, 'content-type': 'application/json' },
      body: JSON.stringify({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'es', recipients: recipients.map((phone) => ({ phone })) }),
    });
    const body = (await res.json()) as { bulk_send_id?: string; status?: string; unique_recipients?: number };
    expect(proxy.state.dropped).toBe(1);
    const created = await db.pool.query<{ stream_id: string }>(`SELECT stream_id FROM es.events WHERE type = 'BulkSendCreated'`);
    // the bulk send exists (the append committed): the answer must say so
    expect({ status: res.status, bulk: body.status, unique: body.unique_recipients, streams: created.rows.map((r) => r.stream_id) })
      .toEqual({ status: 202, bulk: 'queued', unique: 2, streams: [`bulk-${body.bulk_send_id}`] });
    // its job is queued by the request or, left a draft, by the lease sweep: each recipient messaged once
    await sweepBulkLeasesNow(services, { staleMs: 0 });
    const id = body.bulk_send_id!;
    await waitUntil(async () => {
      const r = await fetch(`${base}/api/v1/platform-templates/bulk-sends/${id}/`, { headers: { 'x-api-key': SHOP.key } });
      const b = (await r.json()) as { status?: string };
      return b.status === 'COMPLETED' ? b : undefined;
    }, 60_000, 'the bulk send to complete');
    expect(recipients.map((p) => provider.callsTo(p))).toEqual([1, 1]);
  }, 120_000);

  // checked sound (review 13's retry of the unkeyed send's record): its one append of both streams committed, its
  // answer lost: the retry is recognised as already appended for both, nothing stored or counted twice
  it('an unkeyed send whose accepted record committed, its answer lost: 200, one record of each', async () => {
    const to = '+5491180077003';
    Object.assign(proxy.state, { armed: true, marker: 'TemplateSendAccepted' });
    const res = await fetch(`${base}/api/v1/platform-templates/send/`, {
      method: 'POST',
      headers: { 'x-api-key': SHOP.key, 'content-type': 'application/json' },
      body: JSON.stringify({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'es', recipient_phone: to }),
    });
    const body = (await res.json()) as { message_id?: string };
    expect(proxy.state.dropped).toBe(2);
    const counts = await db.pool.query<{ type: string; n: number }>(
      `SELECT type, count(*)::int AS n FROM es.events WHERE type IN ('TemplateSendAccepted', 'MessageRecorded') AND data::text LIKE $1 GROUP BY type ORDER BY type`,
      [`%${body.message_id}%`],
    );
    expect({ status: res.status, counts: counts.rows }).toEqual({
      status: 200, counts: [{ type: 'MessageRecorded', n: 1 }, { type: 'TemplateSendAccepted', n: 1 }],
    });
    expect(provider.callsTo(to)).toBe(1);
  }, 120_000);

  // isLostConnection (src/shared/retry.ts) is meant to leave out a connect timeout (the pool already waited 10 s for a
  // connection; more tries hold the answer that much longer while the database is unreachable), but a new
  // connection's timeout reads `Connection terminated due to connection timeout` (pg-pool), which it took for a lost
  // connection: the accepted send's record (and an Idempotency-Key record) waited for three connect timeouts, 30 s,
  // before answering.
  it('an unkeyed send whose record cannot get a connection (connect timeout): not tried again', async () => {
    const to = '+5491180077004';
    provider.during = async () => {
      provider.during = undefined;
      proxy.state.blackhole = true;
      proxy.killAll();
      // the pool has seen its idle connections end: the record's append asks for a new one, which never answers
      await waitUntil(async () => pools.store.idleCount === 0, 20_000, 'the idle connections to be gone');
    };
    const before = logs.length;
    const res = await fetch(`${base}/api/v1/platform-templates/send/`, {
      method: 'POST',
      headers: { 'x-api-key': SHOP.key, 'content-type': 'application/json' },
      body: JSON.stringify({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'es', recipient_phone: to }),
    });
    proxy.state.blackhole = false;
    const lines = logs.slice(before).filter((l) => /accepted (send|the message)/.test(String(l.msg)))
      .map((l) => ({ msg: l.msg, err: String((l.err as { message?: string } | undefined)?.message).replace(/: .*/, '') }));
    expect({ status: res.status, lines }).toEqual({
      status: 500,
      lines: [{ msg: 'the provider accepted the message but its record could not be appended', err: 'Connection terminated due to connection timeout' }],
    });
  }, 120_000);
});
