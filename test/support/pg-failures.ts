import { randomBytes } from 'node:crypto';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { Client, type Pool } from 'pg';
import { isDatabaseUnavailable, isDatabaseUnreachable, isLostConnection } from '../../src/shared/retry';

// What the suites that provoke Postgres failures for real share (test/api/review16c-pg-failures.test.ts,
// test/api/regress-review19-pg-not-accepting.test.ts): the error a pool's first statement gets, how
// src/shared/retry.ts classifies it, a scratch database of the test cluster, and a loopback server playing Postgres.

/** How src/shared/retry.ts classifies `err`. */
export const failureClasses = (err: unknown) => ({
  unreachable: isDatabaseUnreachable(err), lost: isLostConnection(err), unavailable: isDatabaseUnavailable(err),
});

/** The error `pool`'s `sql` fails with (undefined if it succeeds); the pool is ended either way. */
export async function failureOf(pool: Pool, sql = 'SELECT 1'): Promise<any> {
  pool.on('error', () => undefined);
  try {
    await pool.query(sql);
    return undefined;
  } catch (err) {
    return err;
  } finally {
    await pool.end().catch(() => undefined);
  }
}

/** The test cluster's URL (TEST_DATABASE_URL) for `database`. */
export function urlOfDatabase(database: string): string {
  const url = new URL(process.env.TEST_DATABASE_URL!);
  url.pathname = `/${database}`;
  return url.toString();
}

/**
 * Runs `body` with a new database of the test cluster, named `<prefix>_<random>`, and an admin connection (to the
 * test database, not to it); the database is dropped and the connection ended after, whatever `body` did.
 */
export async function withScratchDatabase<T>(prefix: string, body: (scratch: { name: string; url: string; admin: Client }) => Promise<T>): Promise<T> {
  const admin = new Client({ connectionString: process.env.TEST_DATABASE_URL });
  await admin.connect();
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    try {
      return await body({ name, url: urlOfDatabase(name), admin });
    } finally {
      await admin.query(`DROP DATABASE ${name}`);
    }
  } finally {
    await admin.end();
  }
}

/**
 * A loopback server on a port the system picks (port 0) that does `onConnection`; after `body` its connections still
 * open are destroyed and it is closed.
 */
export async function withLoopbackServer<T>(onConnection: (socket: Socket) => void, body: (port: number) => Promise<T>): Promise<T> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => sockets.delete(socket));
    onConnection(socket);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  try {
    return await body((server.address() as AddressInfo).port);
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((ok) => server.close(() => ok()));
  }
}
