import { createEventStorePool, createPool } from '../../src/adapters/postgres/pool';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Every pool asks the server to probe its connections after 30 s idle (docs/core.md, "Postgres connections"): a
// backend whose client's host was lost (no FIN) otherwise lives for the system's 2 h with the session advisory locks
// it held, and every other process waits for them (a company's endpoint-creation turn, the periodic jobs' locks).

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => db?.drop());

it.each([
  ['the main pool', () => createPool(db.url, 1)],
  ['the event store pool', () => createEventStorePool(db.url, 1)],
  ['the idempotency pool (asynchronous commits)', () => createPool(db.url, 1, { asyncCommit: true })],
])('%s: server-side TCP keepalive after 30 s, every 10 s, 3 probes; its own settings kept', async (_name, make) => {
  const pool = make();
  try {
    const { rows } = await pool.query(
      `SELECT current_setting('tcp_keepalives_idle') AS idle, current_setting('tcp_keepalives_interval') AS every,
              current_setting('tcp_keepalives_count') AS probes, inet_client_addr() IS NOT NULL AS over_tcp`);
    // the settings apply to TCP connections (on a Unix socket Postgres reports 0): the tests connect over TCP
    expect(rows[0]).toEqual({ idle: '30', every: '10', probes: '3', over_tcp: true });
  } finally {
    await pool.end();
  }
});

it('keeps each pool its own settings beside the keepalive', async () => {
  const store = createEventStorePool(db.url, 1);
  const idempotency = createPool(db.url, 1, { asyncCommit: true });
  try {
    expect((await store.query(`SELECT current_setting('plan_cache_mode') AS v`)).rows[0].v).toBe('force_generic_plan');
    expect((await idempotency.query(`SELECT current_setting('synchronous_commit') AS v`)).rows[0].v).toBe('off');
  } finally {
    await store.end();
    await idempotency.end();
  }
});
