// Review 13: fault injection on the write paths when Postgres connections fail. The service is wired as main.ts
// wires it (its own pools: main, event store, Idempotency-Key records, export), on a fresh database of the run's
// Postgres, served over real HTTP on 127.0.0.1, with a provider double that can run a fault while a call is in
// flight. Each pool's connections carry an application_name, so a fault can target the app's connections (or one
// pool) and never the test's own.
import { Client, type Pool } from 'pg';
import pino from 'pino';
import type { FastifyInstance } from 'fastify';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { createEventStorePool, createPool } from '../../src/adapters/postgres/pool';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import { loadConfig } from '../../src/config';
import { buildApp } from '../../src/http/app';
import { assembleServices } from '../../src/main';
import type { MessagingProvider, SendTemplateRequest, SendTemplateResult } from '../../src/ports/provider';
import type { Services } from '../../src/services';
import { startWorkers, type Workers } from '../../src/workers';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { TEST_ANON_SECRET, TEST_PEPPER } from '../support/services';

export const APP_PREFIX = 'sbfault_';

function withApplicationName(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set('application_name', `${APP_PREFIX}${name}`);
  return u.toString();
}

/** The sandbox behind a recorder: every call counted per recipient; `during` runs while a call is in flight. */
export class FaultProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  readonly sandbox = new SandboxProvider({ delivery: 'off' });
  readonly calls: SendTemplateRequest[] = [];
  readonly accepted: Array<{ to: string; providerMessageId: string }> = [];
  /** run after the provider accepted the message and before the call returns */
  during: ((request: SendTemplateRequest) => Promise<void>) | undefined;

  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    this.calls.push(request);
    const result = await this.sandbox.sendTemplate(request);
    this.accepted.push({ to: request.to, providerMessageId: result.providerMessageId });
    const during = this.during;
    if (during) await during(request);
    return result;
  }

  callsTo(to: string): number {
    return this.calls.filter((c) => c.to === to).length;
  }
}

export interface FaultApp {
  db: TestDatabase;
  services: Services;
  app: FastifyInstance;
  base: string;
  provider: FaultProvider;
  pools: { main: Pool; store: Pool; idempotency: Pool; export: Pool };
  admin: Client;
  unhandled: unknown[];
  /** error and warning lines the service and the app logged (JSON objects) */
  logs: Array<Record<string, unknown>>;
  /** pg_terminate_backend of the app's connections (every pool, or the named one: main, store, idem, export) */
  terminate(pool?: string): Promise<number>;
  /**
   * terminate(), then waits until none of the app's pools holds a client of a terminated backend (each pool saw its
   * connection end): a request after it takes a live connection or a new one, never one about to fail. Without the
   * wait that is a race between the backends' exit (the scheduler's, slow under load) and the next request.
   */
  terminateAndWaitForPools(pool?: string): Promise<number>;
  /** terminate(), answering the backends' pids (for poolsForget) */
  terminatePids(pool?: string): Promise<number[]>;
  /** waits until none of the app's pools holds a client of these backends (each pool saw its connection end) */
  poolsForget(pids: number[]): Promise<void>;
  /** app backends waiting for a lock, whose query matches the LIKE pattern */
  blocked(like: string, pool?: string): Promise<number[]>;
  waitBlocked(like: string, pool?: string, timeoutMs?: number): Promise<number[]>;
  /** takes `LOCK TABLE <table> IN <mode> MODE` on a connection of its own, in a transaction; release() rolls back */
  lock(table: string, mode: string): Promise<{ release(): Promise<void> }>;
  http(method: string, path: string, options?: { key?: string; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; headers: Headers; body: any; text: string }>;
  close(): Promise<void>;
}

export async function startFaultApp(options: { now?: () => Date; env?: Record<string, string>; workers?: boolean } = {}): Promise<FaultApp> {
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown) => unhandled.push(err);
  process.on('unhandledRejection', onUnhandled);
  const logs: Array<Record<string, unknown>> = [];
  const stream = { write: (line: string) => { try { logs.push(JSON.parse(line)); } catch { /* not JSON */ } } };
  const logger = pino({ level: 'warn' }, stream);
  const db = await createTestDatabase({ poolSize: 4 });
  const config = loadConfig({
    DATABASE_URL: db.url,
    ANONYMIZATION_SECRET: TEST_ANON_SECRET,
    API_KEY_PEPPER: TEST_PEPPER,
    SANDBOX_DELIVERY: 'off',
    LOG_LEVEL: 'silent',
    PROVIDER_APP_SECRET: 'test-app-secret',
    PROVIDER_VERIFY_TOKEN: 'test-verify-token',
    WEBHOOKS_ALLOW_HTTP: 'true',
    WEBHOOKS_ALLOW_PRIVATE_URLS: 'true',
    ...options.env,
  });
  // as main.ts wires them (serve): main 20, event store 16 (generic plans), Idempotency-Key records 4 (async commit)
  const pools = {
    main: createPool(withApplicationName(db.url, 'main'), 20),
    store: createEventStorePool(withApplicationName(db.url, 'store')),
    idempotency: createPool(withApplicationName(db.url, 'idem'), 4, { asyncCommit: true }),
    export: createPool(withApplicationName(db.url, 'export'), config.export.maxConcurrent),
  };
  const provider = new FaultProvider();
  const transport = new InProcessTransport();
  const services = assembleServices({
    config,
    secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER },
    pool: pools.main,
    exportPool: pools.export,
    idempotencyPool: pools.idempotency,
    store: new PostgresEventStore(pools.store),
    transport,
    logger,
    now: options.now,
    provider,
  });
  await services.runner.start();
  let workers: Workers | undefined;
  if (options.workers !== false) workers = await startWorkers(services, { role: 'serve' });
  const app = await buildApp(services, { logger: { level: 'warn', stream } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const admin = new Client({ connectionString: db.url });
  admin.on('error', () => undefined);
  await admin.connect();

  const locks = new Set<Client>();
  // pg_stat_activity.query is cut at track_activity_query_size (1 KiB): match a statement by its beginning
  const blocked = async (like: string, pool = ''): Promise<number[]> => {
    const r = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND application_name LIKE $1 AND wait_event_type = 'Lock' AND query LIKE $2`,
      [`${APP_PREFIX}${pool}%`, like],
    );
    return r.rows.map((x) => x.pid);
  };

  /** the backend pids of the clients the app's pools hold (pg-pool's own list, idle or in use) */
  const pooledPids = (): number[] =>
    Object.values(pools).flatMap((p) => ((p as unknown as { _clients?: Array<{ processID?: number | null }> })._clients ?? [])
      .map((c) => c.processID ?? 0));

  const terminatePids = async (pool?: string): Promise<number[]> => (await admin.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE $1 AND pg_terminate_backend(pid)`,
    [`${APP_PREFIX}${pool ?? ''}%`],
  )).rows.map((x) => x.pid);
  const poolsForget = async (pids: number[]): Promise<void> => {
    const killed = new Set(pids);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const left = pooledPids().filter((pid) => killed.has(pid));
      if (left.length === 0) return;
      if (Date.now() > deadline) throw new Error(`the pools still hold clients of terminated backends ${left.join(', ')}`);
      await new Promise((ok) => setTimeout(ok, 10));
    }
  };

  return {
    db, services, app, base, provider, pools, admin, unhandled, logs,
    async terminate(pool?: string) {
      const r = await admin.query<{ n: number }>(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE $1`,
        [`${APP_PREFIX}${pool ?? ''}%`],
      );
      return r.rows[0].n;
    },
    terminatePids,
    poolsForget,
    async terminateAndWaitForPools(pool?: string) {
      const pids = await terminatePids(pool);
      await poolsForget(pids);
      return pids.length;
    },
    blocked,
    async waitBlocked(like: string, pool = '', timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const pids = await blocked(like, pool);
        if (pids.length > 0) return pids;
        if (Date.now() > deadline) {
          const all = await admin.query(`SELECT pid, application_name, state, wait_event_type, wait_event, left(query, 120) AS q FROM pg_stat_activity WHERE datname = current_database()`);
          throw new Error(`no app backend blocked on ${like}: ${JSON.stringify(all.rows)}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async lock(table: string, mode: string) {
      const c = new Client({ connectionString: db.url });
      c.on('error', () => undefined);
      await c.connect();
      locks.add(c);
      await c.query('BEGIN');
      await c.query(`LOCK TABLE ${table} IN ${mode} MODE`);
      return {
        async release() {
          locks.delete(c);
          await c.query('ROLLBACK').catch(() => undefined);
          await c.end().catch(() => undefined);
        },
      };
    },
    async http(method, path, o = {}) {
      const headers: Record<string, string> = { ...(o.headers ?? {}) };
      if (o.key) headers['x-api-key'] = o.key;
      let body: string | undefined;
      if (o.body !== undefined) {
        headers['content-type'] = 'application/json';
        body = JSON.stringify(o.body);
      }
      const res = await fetch(`${base}${path}`, { method, headers, body });
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = text === '' ? undefined : JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      return { status: res.status, headers: res.headers, body: parsed, text };
    },
    async close() {
      process.off('unhandledRejection', onUnhandled);
      for (const c of locks) await c.end().catch(() => undefined);
      await admin.end().catch(() => undefined);
      await app.close();
      await workers?.stop();
      await services.runner.stop();
      await transport.close();
      await services.store.close();
      for (const p of Object.values(pools)) await p.end().catch(() => undefined);
      await db.drop();
    },
  };
}

/** How many events of `type` the log holds (for a stream, when given): the test's own pool, outside the app's. */
export async function countEvents(pool: Pool, type: string, streamLike = '%'): Promise<number> {
  const r = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM es.events WHERE type = $1 AND stream_id LIKE $2', [type, streamLike]);
  return r.rows[0].n;
}
