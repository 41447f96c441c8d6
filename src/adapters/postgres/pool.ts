import { Pool, type PoolClient, types } from 'pg';

// int8 as JS string is the pg default; bigint columns are converted explicitly where read.
types.setTypeParser(types.builtins.INT8, (v) => v);

export type Db = Pool;
export type Tx = PoolClient;

export function createPool(url: string, max = 10): Pool {
  const pool = new Pool({ connectionString: url, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000 });
  // A terminated backend (fault, failover, shutdown) surfaces here for idle clients; the pool replaces them.
  pool.on('error', () => undefined);
  // For checked-out clients the failing query rejects; without a listener the client's 'error' event would crash.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

export { withTransaction } from '../../shared/tx';
