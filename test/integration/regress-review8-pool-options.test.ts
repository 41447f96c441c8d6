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

// Review of 2026-11-27 (night): node-postgres parses dates only in ISO output; a server, PGOPTIONS or URL setting
// DateStyle to SQL, German or Postgres made `expires_at < now()` comparisons done in JS fail (expired API keys
// accepted) and dates read back as '24/12/2026'. The pools now always ask for ISO output, last.
it('dates and intervals are parsed whatever DateStyle and IntervalStyle PGOPTIONS or the URL ask for', async () => {
  const before = process.env.PGOPTIONS;
  process.env.PGOPTIONS = '-c DateStyle=SQL,DMY -c IntervalStyle=sql_standard';
  const url = new URL(db.url);
  url.searchParams.set('options', '-c DateStyle=German');
  const pool = createPool(url.toString(), 1);
  try {
    const { rows } = await pool.query<{ at: Date; day: unknown; style: string; ymd: string }>(
      `SELECT timestamptz '2026-12-24 10:30:00+00' AS at, date '2026-12-24'::text AS day,
              current_setting('DateStyle') AS style, to_char(date '2026-02-03', 'YYYY-MM-DD') AS ymd`,
    );
    expect(rows[0].at.toISOString()).toBe('2026-12-24T10:30:00.000Z');
    expect(rows[0].day).toBe('2026-12-24');
    expect(rows[0].style).toMatch(/^ISO, /);
    // the input order the operator chose is kept: '03/02/2026' is read day first
    const input = await pool.query<{ d: string }>(`SELECT '03/02/2026'::date::text AS d`);
    expect(input.rows[0].d).toBe('2026-02-03');
  } finally {
    await pool.end();
    if (before === undefined) delete process.env.PGOPTIONS;
    else process.env.PGOPTIONS = before;
  }
});
