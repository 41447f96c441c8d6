import type { Pool } from 'pg';
import { createEventStorePool, createPool } from '../../src/adapters/postgres/pool';
import { createTestDatabase, type TestDatabase } from '../support/db';

// A DATABASE_URL may carry libpq startup options of its own (`?options=-c ...`). pg takes them in place of the
// pool's (server-side keepalive, the event store's generic plans); the pool merges them instead, the URL's last, so
// a setting named in both is the URL's (docs/core.md, "Postgres connections").

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => db?.drop());

function withQuery(query: string): string {
  return `${db.url}${db.url.includes('?') ? '&' : '?'}${query}`;
}

async function settings(pool: Pool, names: string[]): Promise<Record<string, string>> {
  const client = await pool.connect();
  try {
    const out: Record<string, string> = {};
    for (const name of names) out[name] = (await client.query(`SHOW ${name}`)).rows[0][name];
    return out;
  } finally {
    client.release();
    await pool.end();
  }
}

it.each([
  ['percent-encoded', 'options=-c%20statement_timeout%3D1234'],
  ['with plain spaces', 'options=-c statement_timeout=1234'],
  ['with + for spaces', 'options=-c+statement_timeout%3D1234'],
])('the URL\'s options (%s) apply beside the pool\'s keepalive', async (_name, query) => {
  expect(await settings(createPool(withQuery(query), 1), ['statement_timeout', 'tcp_keepalives_idle'])).toEqual({
    statement_timeout: '1234ms', tcp_keepalives_idle: '30',
  });
});

it('the event store pool keeps its generic plans beside the URL\'s options', async () => {
  const pool = createEventStorePool(withQuery('options=-c%20statement_timeout%3D1234'), 1);
  expect(await settings(pool, ['statement_timeout', 'plan_cache_mode', 'tcp_keepalives_count'])).toEqual({
    statement_timeout: '1234ms', plan_cache_mode: 'force_generic_plan', tcp_keepalives_count: '3',
  });
});

it('a setting the URL names wins over the pool\'s own; the others stay', async () => {
  const pool = createPool(withQuery('options=-c%20tcp_keepalives_idle%3D60%20-c%20synchronous_commit%3Dlocal'), 1,
    { asyncCommit: true });
  expect(await settings(pool, ['tcp_keepalives_idle', 'tcp_keepalives_interval', 'synchronous_commit'])).toEqual({
    tcp_keepalives_idle: '60', tcp_keepalives_interval: '10', synchronous_commit: 'local',
  });
});

it('the URL\'s other parameters are kept', async () => {
  const pool = createPool(withQuery('application_name=from-url&options=-c%20statement_timeout%3D1234'), 1);
  expect(await settings(pool, ['application_name', 'statement_timeout', 'tcp_keepalives_idle'])).toEqual({
    application_name: 'from-url', statement_timeout: '1234ms', tcp_keepalives_idle: '30',
  });
});
