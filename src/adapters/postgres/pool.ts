import { Pool, type PoolClient, types } from 'pg';

// int8 as JS string is the pg default; bigint columns are converted explicitly where read.
types.setTypeParser(types.builtins.INT8, (v) => v);

export type Db = Pool;
export type Tx = PoolClient;

export interface PoolOptions {
  /**
   * Prepared statements always run their generic plan (plan_cache_mode): for a pool that only runs fixed,
   * index-shaped statements (the event store's), whose plan does not depend on the values. Postgres otherwise
   * keeps planning a statement whose arrays make the generic plan look costlier (appendMany: 0.3 ms a call).
   */
  genericPlans?: boolean;
  /**
   * Commits return before the WAL is flushed (synchronous_commit=off): for records whose loss in a crash of
   * Postgres itself (the last ~0.6 s) costs nothing but a re-run, like the Idempotency-Key records
   * (docs/idempotency.md). Never for the event store.
   */
  asyncCommit?: boolean;
}

/**
 * The server's side of the same: a backend whose client vanished (its host lost, the connection half-open) is ended
 * after about a minute instead of the system's 2 h, and with it the session advisory locks it held (the periodic
 * jobs', the rebuild guard's, a company's endpoint-creation turn), which every other process would wait for.
 */
const SERVER_SIDE_KEEPALIVE = '-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3';

/**
 * A transaction left idle this long is ended by Postgres with its session (2026-11-28, review 15f): a process paused
 * or frozen with one open (SIGSTOP, `docker pause`, a VM or GC freeze) held its locks for as long as it stayed so, and
 * every other process waited for them: a number's quota lock (its sends and bulk claims), a bulk job's row, the
 * contact-id sequence's creation, the fan-out's and the sender's rows. The services' transactions idle only for their
 * JavaScript between two statements (milliseconds); an export page's transaction, idle while its HTTP client reads,
 * sets its own (15 min; docs/export.md, "Slow clients"). The projection batches rely on it (src/workers/projection-batch-sql.ts).
 */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000;
const IDLE_IN_TRANSACTION = `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`;

/** Output formats node-postgres parses; only the output part of DateStyle (the input order is kept). */
const PARSEABLE_OUTPUT = '-c DateStyle=ISO -c IntervalStyle=postgres';

/**
 * pg takes a connection string's `options` parameter in place of the pool's own: it is taken out of the URL here (the
 * rest of the URL as written) to be sent after the pool's. Read as pg reads it: the last `options=` of the query.
 */
function takeUrlOptions(url: string): { url: string; options?: string } {
  const query = url.indexOf('?');
  const fragment = url.indexOf('#');
  if (url.startsWith('/') || query < 0 || (fragment >= 0 && fragment < query)) return { url };
  const end = fragment < 0 ? url.length : fragment;
  let options: string | undefined;
  const kept = url.slice(query + 1, end).split('&').filter((pair) => {
    const [entry] = new URLSearchParams(pair);
    if (entry?.[0] !== 'options') return true;
    options = entry[1];
    return false;
  });
  if (options === undefined) return { url };
  return { url: url.slice(0, query) + (kept.length > 0 ? `?${kept.join('&')}` : '') + url.slice(end), options };
}

export function createPool(databaseUrl: string, max = 10, options: PoolOptions = {}): Pool {
  const { url, options: urlOptions } = takeUrlOptions(databaseUrl);
  const pool = new Pool({
    connectionString: url, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000,
    // TCP keepalive: a connection whose peer vanished without a FIN (failover, dropped NAT entry) is found dead by
    // the kernel's probes rather than after the system's default idle time (2 h on Linux)
    keepAlive: true, keepAliveInitialDelayMillis: 10_000,
    options: [
      // pg reads PGOPTIONS only when no options are given (every pool gives some): the operator's, first
      process.env.PGOPTIONS,
      SERVER_SIDE_KEEPALIVE,
      IDLE_IN_TRANSACTION,
      options.genericPlans && '-c plan_cache_mode=force_generic_plan',
      options.asyncCommit && '-c synchronous_commit=off',
      // then: Postgres applies `-c` settings in order, so a setting the operator's URL names wins
      urlOptions,
      // except the output formats node-postgres can parse (a server or operator set to DateStyle SQL, German or
      // Postgres made expired API keys pass and holidays read '24/12/2026'): ISO dates, Postgres-style intervals
      PARSEABLE_OUTPUT,
    ].filter(Boolean).join(' '),
  });
  // A terminated backend (fault, failover, shutdown) surfaces here for idle clients; the pool replaces them.
  pool.on('error', () => undefined);
  // For checked-out clients the failing query rejects; without a listener the client's 'error' event would crash.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

export { withTransaction } from '../../shared/tx';

/** The event store's pool, as the composition root wires it: its own connections, generic plans. */
export function createEventStorePool(url: string, max = 16): Pool {
  return createPool(url, max, { genericPlans: true });
}
