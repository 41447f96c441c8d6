import type { Socket } from 'node:net';
import { createTestDatabase, type TestDatabase } from './db';
import { type ProxiedConnection, TcpProxy } from './tcp-proxy';

// Several `serve` processes on one database, each wired by src/main.ts's own `startRuntime` (its pools, projection
// runner, workers, caches and listener) and listening on a real port. Each is loaded in its own module registry
// (jest.isolateModules): module state (the change marks of src/projections/change-signals.ts, the send catalog, the
// bulk signals) is its own, as in a process of its own; only the database joins them.

export const MP_PEPPER = 'mp-pepper-0123456789abcdef';
export const MP_ANON_SECRET = 'mp-anonymization-secret-0123456789';

type MainModule = typeof import('../../src/main');
type ConfigModule = typeof import('../../src/config');
type Runtime = Awaited<ReturnType<MainModule['startRuntime']>>;

export interface ServeProcess {
  name: string;
  url: string;
  runtime: Runtime;
  /** requires a module of this process's own registry (e.g. '../../src/commands/provisioning/seed') */
  load<T = any>(path: string): T;
  stop(): Promise<void>;
}

function isolatedRequire(): (path: string) => any {
  let req!: (path: string) => any;
  jest.isolateModules(() => {
    const cache = new Map<string, any>();
    // requires made later (inside the test) must resolve in this registry: keep the loaded modules
    const main = require('../../src/main');
    cache.set('../../src/main', main);
    cache.set('../../src/config', require('../../src/config'));
    cache.set('../../src/commands/provisioning/seed', require('../../src/commands/provisioning/seed'));
    cache.set('../../src/projections/rebuild', require('../../src/projections/rebuild'));
    cache.set('../../src/projections/registry', require('../../src/projections/registry'));
    req = (path: string) => {
      if (!cache.has(path)) throw new Error(`multi-process: ${path} was not loaded in the process's registry`);
      return cache.get(path);
    };
  });
  return req;
}

/** One `serve` as main.ts starts it, against `databaseUrl`, on a free loopback port. */
export async function startServe(name: string, databaseUrl: string, env: Record<string, string> = {}): Promise<ServeProcess> {
  const load = isolatedRequire();
  const { startRuntime, createLogger } = load('../../src/main') as MainModule;
  const { loadConfig } = load('../../src/config') as ConfigModule;
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    ANONYMIZATION_SECRET: MP_ANON_SECRET,
    API_KEY_PEPPER: MP_PEPPER,
    SANDBOX_DELIVERY: 'off',
    LOG_LEVEL: 'silent',
    PROVIDER_APP_SECRET: 'test-app-secret',
    PROVIDER_VERIFY_TOKEN: 'test-verify-token',
    ...env,
  });
  const runtime = await startRuntime(config, 'serve', { logger: createLogger(config) });
  return {
    name,
    url: runtime.url!,
    runtime,
    load,
    async stop() {
      await runtime.beginStop({ delay: false });
      await runtime.stop();
    },
  };
}

export interface Cluster {
  db: TestDatabase;
  processes: ServeProcess[];
  /** the proxy in front of the database of each process started with `proxied` (by name) */
  proxies: Map<string, ListenerHoldingProxy>;
  close(): Promise<void>;
}

/** `names.length` serve processes on one fresh database; those in `proxied` reach it through a ListenerHoldingProxy. */
export async function startCluster(names: string[], options: { env?: Record<string, string>; proxied?: string[] } = {}): Promise<Cluster> {
  const db = await createTestDatabase({ poolSize: 4 });
  const processes: ServeProcess[] = [];
  const proxies = new Map<string, ListenerHoldingProxy>();
  try {
    for (const name of names) {
      let url = db.url;
      if (options.proxied?.includes(name)) {
        const proxy = new ListenerHoldingProxy();
        const target = new URL(db.url);
        await proxy.start(target.hostname, Number(target.port || 5432));
        proxies.set(name, proxy);
        const via = new URL(db.url);
        via.hostname = '127.0.0.1';
        via.port = String(proxy.port);
        url = via.toString();
      }
      processes.push(await startServe(name, url, options.env));
    }
  } catch (err) {
    for (const p of processes.reverse()) await p.stop().catch(() => undefined);
    for (const proxy of proxies.values()) await proxy.stop();
    await db.drop();
    throw err;
  }
  return {
    db,
    processes,
    proxies,
    async close() {
      for (const p of [...processes].reverse()) await p.stop().catch(() => undefined);
      for (const proxy of proxies.values()) await proxy.stop();
      await db.drop();
    },
  };
}

type ListenerConnection = ProxiedConnection & { listening: boolean; held: Buffer[] };

/**
 * A TCP proxy to Postgres that can hold back what the server sends on the process's LISTEN connections (those whose
 * client sent `LISTEN …`): notifications then arrive late, as from a busy process, a slow network or a retransmission,
 * while every other connection of the process goes on at once. `release()` lets the held bytes through, in order.
 */
export class ListenerHoldingProxy extends TcpProxy<ListenerConnection> {
  private holding = false;

  protected connection(client: Socket, server: Socket): ListenerConnection {
    return { client, server, listening: false, held: [] };
  }

  protected override fromClient(c: ListenerConnection, data: Buffer): void {
    if (data.includes('LISTEN ')) c.listening = true;
    super.fromClient(c, data);
  }

  protected override fromServer(c: ListenerConnection, data: Buffer): void {
    if (c.listening && (this.holding || c.held.length > 0)) c.held.push(data);
    else super.fromServer(c, data);
  }

  /** LISTEN connections of the process seen so far */
  get listeners(): number {
    return this.connections.filter((c) => c.listening && !c.client.destroyed).length;
  }

  hold(): void {
    this.holding = true;
  }

  release(): void {
    this.holding = false;
    for (const c of this.connections) for (const d of c.held.splice(0)) c.client.write(d);
  }

  override async stop(): Promise<void> {
    this.release();
    await super.stop();
  }
}

/** A JSON request over real HTTP to one process. */
export async function call(
  p: ServeProcess,
  method: string,
  path: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers['x-api-key'] = options.key;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${p.url}${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (NDJSON export): the text
  }
  return { status: res.status, body, headers: res.headers };
}
