// Review 8 of a231d3a: two defects, fixed 2026-11-27 (evening); both tests fail on 3c06d15.
// 1. createPool always sets pg's `options` (the server-side keepalive), and node-postgres reads PGOPTIONS only when
//    `options` is unset: an operator's PGOPTIONS was silently ignored since a231d3a (now sent first).
// 2. A DATABASE_URL carrying `?options=...` replaced the pool's whole `options`, so that pool ran without the
//    keepalive (now the URL's options are sent after the pool's own; pool-url-options.test.ts).
import { createPool } from '../../src/adapters/postgres/pool';
import { createTestDatabase, type TestDatabase } from '../support/db';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => db?.drop());

const settings = async (url: string) => {
  const pool = createPool(url, 1);
  try {
    const { rows } = await pool.query<{ timeout: string; idle: string }>(
      `SELECT current_setting('statement_timeout') AS timeout, current_setting('tcp_keepalives_idle') AS idle`,
    );
    return rows[0];
  } finally {
    await pool.end();
  }
};

it('the main pool still applies the operator\'s PGOPTIONS (it did before a231d3a), beside the keepalive', async () => {
  const before = process.env.PGOPTIONS;
  process.env.PGOPTIONS = '-c statement_timeout=4321';
  try {
    expect(await settings(db.url)).toEqual({ timeout: '4321ms', idle: '30' });
  } finally {
    if (before === undefined) delete process.env.PGOPTIONS;
    else process.env.PGOPTIONS = before;
  }
});

it('a DATABASE_URL with its own `options` keeps them and still gets the server-side keepalive', async () => {
  const url = new URL(db.url);
  url.searchParams.set('options', '-c statement_timeout=4321');
  expect(await settings(url.toString())).toEqual({ timeout: '4321ms', idle: '30' });
});
