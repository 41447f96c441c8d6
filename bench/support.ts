import { type ChildProcess, fork } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pool } from 'pg';
import { startEmbeddedPostgres } from '../src/adapters/postgres/embedded';
import { migrate } from '../src/adapters/postgres/migrations';
import { createEventStorePool, createPool } from '../src/adapters/postgres/pool';
import pino from 'pino';
import { PostgresEventStore } from '../src/adapters/event-store/postgres';
import { InProcessTransport } from '../src/adapters/in-process/transport';
import { loadConfig } from '../src/config';
import { assembleServices } from '../src/main';
import type { MessagingProvider } from '../src/ports/provider';
import type { BatchHandler, IncomingRecord, OutgoingRecord, RecordTransport } from '../src/ports/transport';
import type { Services } from '../src/services';
import { PROVIDER_WEBHOOK_TOPIC, splitWebhook, statusWebhook } from '../src/shared/provider-webhook';

export interface BenchLine {
  bench: string;
  metric: string;
  value: number;
  unit: string;
  baseline?: string;
  baseline_value?: number;
  ratio?: number;
  budget?: number;
  ok?: boolean;
  [extra: string]: unknown;
}

/** One JSON object per line on stdout, nothing else (ARCHITECTURE section 13). */
export function emit(line: BenchLine): void {
  const out: BenchLine = { ...line };
  if (out.baseline_value !== undefined && out.ratio === undefined) out.ratio = round(out.value / out.baseline_value, 3);
  if (out.budget !== undefined && out.ok === undefined) {
    out.ok = out.ratio !== undefined ? out.ratio >= out.budget : out.unit === 'ms' ? out.value < out.budget : out.value >= out.budget;
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

export const round = (n: number, digits = 1): number => Math.round(n * 10 ** digits) / 10 ** digits;

/** The median of repeated measurements (the upper one of an even count). */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

/** A Postgres for the bench: DATABASE_URL (a fresh database in it) or an embedded server in a temp dir. */
export async function benchDatabase(name: string): Promise<{ url: string; pool: Pool; storePool: Pool; exportPool: Pool; idempotencyPool: Pool; close(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  let stopServer = async () => {};
  let dir: string | undefined;
  let serverUrl: string;
  if (base) {
    serverUrl = base;
  } else {
    dir = mkdtempSync(join(tmpdir(), `switchboard-bench-${name}-`));
    chmodSync(dir, 0o755); // as root the postgres user must reach it, else the cluster moves out of dir (docs/install.md)
    const pg = await startEmbeddedPostgres(dir);
    serverUrl = pg.url;
    stopServer = pg.stop;
  }
  const dbName = `bench_${name.replace(/\W/g, '_')}_${process.pid}`;
  const admin = createPool(serverUrl, 1);
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  const url = u.toString();
  const pool = createPool(url, 20);
  const storePool = createEventStorePool(url); // as main.ts wires it
  const exportPool = createPool(url, loadConfig({}).export.maxConcurrent); // as main.ts wires it (default size)
  const idempotencyPool = createPool(url, 4, { asyncCommit: true }); // as main.ts wires it
  await migrate(pool);
  return {
    url,
    pool,
    storePool,
    exportPool,
    idempotencyPool,
    async close() {
      await idempotencyPool.end();
      await exportPool.end();
      await storePool.end();
      await pool.end();
      const a = createPool(serverUrl, 1);
      await a.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
      await a.end();
      await stopServer();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const BENCH_PEPPER = 'bench-pepper-0123456789abcdef';
export const BENCH_ANON_SECRET = 'bench-anonymization-secret-0123456789';

/**
 * The services a bench runs against (as `assembleServices` wires them in main.ts): the Postgres event store on
 * the bench database, the in-process transport unless given, the sandbox provider with delivery off unless given.
 * Not started: the bench calls `services.runner.start()` or `prepare()` itself.
 */
export function benchServices(
  db: { url: string; pool: Pool; storePool: Pool; exportPool: Pool; idempotencyPool?: Pool },
  options: { env?: Record<string, string>; transport?: RecordTransport; provider?: MessagingProvider } = {},
): Services {
  const config = loadConfig({
    DATABASE_URL: db.url, ANONYMIZATION_SECRET: BENCH_ANON_SECRET, API_KEY_PEPPER: BENCH_PEPPER, SANDBOX_DELIVERY: 'off', LOG_LEVEL: 'silent',
    // the benches drive one key far past the service's default limit; bench/reads.ts measures the limiter itself
    RATE_LIMIT_PER_MINUTE: '1000000000',
    ...options.env,
  });
  return assembleServices({
    config,
    secrets: { anonymizationSecret: BENCH_ANON_SECRET, apiKeyPepper: BENCH_PEPPER },
    pool: db.pool,
    exportPool: db.exportPool,
    idempotencyPool: db.idempotencyPool,
    store: new PostgresEventStore(db.storePool),
    transport: options.transport ?? new InProcessTransport(),
    logger: pino({ level: 'silent' }),
    provider: options.provider,
  });
}

/** The template the send benches send: body TEXT and CURRENCY variables and a URL button (template id 1). */
export const BENCH_ORDER_TEMPLATE = {
  id: 1, name: 'order_update', language: 'es', category: 'UTILITY', status: 'APPROVED',
  variables: [
    { name: 'name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
    { name: 'total', type: 'CURRENCY', position: 2, isRequired: true, component: 'BODY' },
    { name: 'code', type: 'TEXT', position: 1, isRequired: true, component: 'BUTTON' },
  ],
  buttons: [{ type: 'URL', text: 'Track', url: 'https://bench.example/t/{{1}}' }],
};

/**
 * The provisioning fixture of a bench: company 1 "Bench Co" with user 1 and one API key `key`, and the parts the
 * bench gives (its contact lists, its phone numbers, its AI agents and human operators).
 */
/** autocannon ships no type declarations: the slice of its API the benches use */
export interface CannonResult {
  '2xx': number; non2xx: number; errors: number; timeouts: number; duration: number;
  requests: { average: number };
  latency: { p50: number; p99: number };
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const autocannon: (options: Record<string, unknown>) => Promise<CannonResult> = require('autocannon');

/** The single-send benches' company key and its one unlimited number, which has BENCH_ORDER_TEMPLATE. */
export const BENCH_KEY = 'sbk_bench0000aaaaaaaaaaaaaaaaaaaaaaaa';
export const BENCH_PHONE_NUMBER_ID = '900000000000001';
export const benchSendsFixture = () => benchFixture(BENCH_KEY, {
  phoneNumbers: [{
    id: 1, phoneNumberId: BENCH_PHONE_NUMBER_ID, displayPhoneNumber: '+54 11 0000-0001', verifiedName: 'Bench', businessName: 'Bench SA',
    isPrimary: true, messagingLimitTier: 'TIER_UNLIMITED', qualityRating: 'GREEN', templates: [BENCH_ORDER_TEMPLATE],
  }],
});

export function benchFixture(key: string, parts: { contactLists?: unknown[]; phoneNumbers?: unknown[]; agents?: unknown[]; operators?: unknown[] }) {
  return {
    companies: [{
      id: 1, name: 'Bench Co', email: 'b@bench.example', phone: '+541100000000', website: 'https://bench.example', address: 'x',
      description: 'bench', timezone: 'America/Argentina/Buenos_Aires', companySize: 'SMALL', companyTypes: ['ECOMMERCE'], categories: [],
      users: [{ id: 1, email: 'ops@bench.example', first_name: 'O', last_name: 'P' }],
      apiKeys: [{ name: 'bench', key, userId: 1, active: true, expiresAt: null }],
      contactLists: parts.contactLists ?? [{ id: 1, name: 'All', isDefault: true, customFields: [] }],
      contacts: [], branches: [], holidays: [], agents: parts.agents ?? [], operators: parts.operators ?? [],
      phoneNumbers: parts.phoneNumbers ?? [],
    }],
    globalKeys: [],
  };
}

/** Runs `fn(i)` for i = 0 … count-1 with at most `concurrency` calls running at once (in-process load). */
export async function runConcurrently(count: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, count)) }, worker));
}

/**
 * The records of the provider's status notifications for these provider message ids (as the webhook ingress
 * splits them onto provider.webhooks): for each status in `statuses`, one webhook per 100 ids; `read` is
 * stamped a minute after the others. `nowUnix`: the notifications' unix time.
 */
export function providerStatusRecords(
  phoneNumberId: string,
  providerMessageIds: readonly string[],
  statuses: ReadonlyArray<'delivered' | 'read'>,
  nowUnix = Math.floor(Date.now() / 1000),
): OutgoingRecord[] {
  const records: OutgoingRecord[] = [];
  for (const status of statuses) {
    for (let i = 0; i < providerMessageIds.length; i += 100) {
      const body = statusWebhook(providerMessageIds.slice(i, i + 100).map((id) => ({
        phoneNumberId, providerMessageId: id, status, timestamp: String(status === 'read' ? nowUnix + 60 : nowUnix), recipientId: '1',
      })));
      records.push(...splitWebhook(body, new Date().toISOString())!);
    }
  }
  return records;
}

/**
 * Published records as a consumer receives them (JSON-encoded and decoded, as on Kafka and the in-process
 * transport), with consecutive offsets from `firstOffset`: for calling a consumer's batch handler in-process.
 */
export function asIncoming(records: readonly OutgoingRecord[], topic = PROVIDER_WEBHOOK_TOPIC, firstOffset = 0): IncomingRecord[] {
  return records.map((r, i) => ({
    topic, key: r.key, value: JSON.parse(JSON.stringify(r.value ?? null)) as unknown, partition: 0, offset: String(firstOffset + i), headers: { ...(r.headers ?? {}) },
  }));
}

/**
 * Forks the bench's own script with the argument `serve`: the server runs in the child, the load generator in this
 * process, so they do not share an event loop (as clients and a server would not). Stdout stays the parent's (JSON
 * lines only); the child's stderr is inherited. BENCH_SERVER_NODE_ARGS: node options for the server only (e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it).
 */
export function forkServer(file: string): ChildProcess {
  const execArgv = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  return fork(file, ['serve'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv });
}

/** Stops what benchServices started, in order: the projection runner, the provider, the transport, the store, the database. */
export async function closeBenchServices(services: Services, provider: { close(): Promise<void> }, db: { close(): Promise<void> }): Promise<void> {
  await services.runner.stop();
  await provider.close();
  await services.transport.close();
  await services.store.close();
  await db.close();
}

/** A forked bench file's entry: `serve` (the child) runs its server, anything else its load generator and exits. */
export function runForkedBench(name: string, server: () => Promise<void>, main: () => Promise<void>): void {
  const serving = process.argv[2] === 'serve';
  (serving ? server() : main()).then(
    () => {
      if (!serving) process.exit(0);
    },
    (err) => {
      log(`${name} bench failed: ${(err as Error)?.stack ?? String(err)}`);
      process.exit(1);
    },
  );
}

/** The child's next message of this type; rejects on its `error` message or on its exit. */
export function nextMessage<M extends { type: string }, T extends M['type']>(child: ChildProcess, type: T): Promise<Extract<M, { type: T }>> {
  return new Promise((resolvePromise, reject) => {
    const onMessage = (m: M & { message?: string }) => {
      if (m.type === 'error') return done(() => reject(new Error(`server: ${m.message}`)));
      if (m.type === type) done(() => resolvePromise(m as Extract<M, { type: T }>));
    };
    const onExit = (code: number | null) => done(() => reject(new Error(`server exited (${code}) before '${type}'`)));
    const done = (fn: () => void) => {
      child.off('message', onMessage);
      child.off('exit', onExit);
      fn();
    };
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

/** Resolves when the child has exited, or after `ms` (a profiling child may take a moment to write its profile). */
export function exited(child: ChildProcess, ms = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolvePromise) => {
    const timer = setTimeout(resolvePromise, ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolvePromise();
    });
  });
}

/** Hands records to the delivery consumer's batch handler, as its transport would; transient outcomes are handed over again. */
export async function handOver(handler: BatchHandler, records: IncomingRecord[]): Promise<number> {
  let pending = records;
  let applied = 0;
  for (let attempt = 0; pending.length > 0; attempt++) {
    const outcomes = await handler(pending);
    const poison = outcomes.find((o) => o.kind === 'poison');
    if (poison) throw new Error(`a status was dead-lettered: ${(poison as { reason: string }).reason}`);
    const retry = pending.filter((_, i) => outcomes[i].kind === 'retry');
    applied += pending.length - retry.length;
    if (retry.length > 0 && attempt >= 20) {
      const { error } = outcomes.find((o) => o.kind === 'retry') as { error: unknown };
      throw new Error(`${retry.length} statuses not applied after ${attempt} attempts: ${(error as Error)?.stack ?? String(error)}`);
    }
    pending = retry;
    if (retry.length > 0) await new Promise((r) => setTimeout(r, 50));
  }
  return applied;
}

// CPU seconds used so far, from /proc (Linux; zeros elsewhere): a bench takes two snapshots around a round and
// divides by the round's operations to get the CPU each operation cost, server, Postgres and load generator apart.

export interface CpuSnapshot {
  /** the process `serverPid` (the forked server) */
  server: number;
  /**
   * the embedded Postgres the server started (its postmaster and every child: backends, autovacuum, the WAL
   * writer...); with DATABASE_URL, every process named postgres on this machine
   */
  postgres: number;
  /** this process */
  self: number;
}

const CLOCK_TICKS_PER_S = 100;

function processCpu(pid: string): { comm: string; ppid: string; seconds: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // after "pid (comm) ": state, ppid, ... utime and stime (fields 14 and 15 of the whole line)
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ppid: fields[1], seconds: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S };
  } catch {
    return undefined; // gone meanwhile, or no /proc
  }
}

export function cpuSnapshot(serverPid: number): CpuSnapshot {
  let postgres = 0;
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    // no /proc: postgres stays 0
  }
  const all = new Map(pids.map((pid) => [pid, processCpu(pid)]));
  const postmasters = new Set([...all].filter(([, p]) => p?.comm === 'postgres' && p.ppid === String(serverPid)).map(([pid]) => pid));
  for (const [pid, p] of all) {
    if (p?.comm !== 'postgres') continue;
    if (postmasters.size === 0 || postmasters.has(pid) || postmasters.has(p.ppid)) postgres += p.seconds;
  }
  const own = process.cpuUsage();
  return { server: processCpu(String(serverPid))?.seconds ?? 0, postgres, self: (own.user + own.system) / 1e6 };
}

/** CPU milliseconds per unit (a send, an event) between two snapshots, each side and their total. */
export function cpuMsPer(before: CpuSnapshot, after: CpuSnapshot, units: number): CpuSnapshot & { total: number } {
  const per = (k: keyof CpuSnapshot) => ((after[k] - before[k]) * 1000) / units;
  const ms = { server: per('server'), postgres: per('postgres'), self: per('self') };
  return { ...ms, total: ms.server + ms.postgres + ms.self };
}
