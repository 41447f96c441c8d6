import { createPool } from '../../src/adapters/postgres/pool';
import { analyzeSchema, StatisticsKeeper } from '../../src/projections/statistics';
import { createTestDatabase, type TestDatabase } from '../support/db';

/** Inserts `n` rows on one connection and makes its table counters visible to others at once. */
async function grow(db: TestDatabase, table: string, n: number): Promise<void> {
  const client = await db.pool.connect();
  try {
    await client.query(
      `INSERT INTO ${table} (k, doc) SELECT m.k + g, jsonb_build_object('g', g) FROM (SELECT COALESCE(max(k), 0) AS k FROM ${table}) m, generate_series(1, $1) g`,
      [n],
    );
    await client.query('SELECT pg_stat_force_next_flush()');
    await client.query('SELECT 1'); // the forced flush happens when this backend next goes idle
  } finally {
    client.release();
  }
}

const analyzedAt = async (db: TestDatabase, schema: string, table: string) =>
  (await db.pool.query<{ at: Date | null }>('SELECT last_analyze AS at FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2', [schema, table])).rows[0]?.at ?? null;

describe('statistics of young tables', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    await db.pool.query(`CREATE SCHEMA rm_young; CREATE TABLE rm_young.items (k integer PRIMARY KEY, doc jsonb NOT NULL);
                         CREATE SCHEMA elsewhere; CREATE TABLE elsewhere.items (k integer PRIMARY KEY, doc jsonb NOT NULL)`);
  });
  afterAll(() => db?.drop());

  it('analyzes a table of its schemas once it has grown past the minimum, then again only when it has more than doubled', async () => {
    const keeper = new StatisticsKeeper(db.pool, ['rm_young'], { minGrowth: 1000 });
    await grow(db, 'rm_young.items', 500);
    expect(await keeper.refresh()).toEqual([]); // below the minimum: left alone
    expect(await analyzedAt(db, 'rm_young', 'items')).toBeNull();

    await grow(db, 'rm_young.items', 1000); // 1,500 rows, never analyzed
    await grow(db, 'elsewhere.items', 5000); // not one of its schemas
    expect(await keeper.refresh()).toEqual(['rm_young.items']);
    expect(await analyzedAt(db, 'rm_young', 'items')).not.toBeNull();
    expect(await analyzedAt(db, 'elsewhere', 'items')).toBeNull();
    const stats = await db.pool.query<{ attname: string }>(
      `SELECT attname FROM pg_stats WHERE schemaname = 'rm_young' AND tablename = 'items' ORDER BY attname`);
    expect(stats.rows.map((r) => r.attname)).toEqual(['k']); // the indexed column only: the json column is not sampled

    expect((await db.pool.query(`SELECT reltuples FROM pg_class WHERE oid = 'rm_young.items'::regclass`)).rows[0].reltuples).toBe(1500);

    await grow(db, 'rm_young.items', 1000); // 2,500 rows: grown by 1,000, less than its 1,500 rows + 1,000
    expect(await keeper.refresh()).toEqual([]);
    expect(await keeper.refresh()).toEqual([]);
    await grow(db, 'rm_young.items', 2000); // 4,500 rows: grown by 3,000
    expect(await keeper.refresh()).toEqual(['rm_young.items']);
    expect(await keeper.refresh()).toEqual([]); // and not again at the next look
  });

  it('runs on its own while started, and stops', async () => {
    await db.pool.query('CREATE SCHEMA rm_timed; CREATE TABLE rm_timed.items (k integer PRIMARY KEY, doc jsonb NOT NULL)');
    const keeper = new StatisticsKeeper(db.pool, ['rm_timed'], { intervalMs: 20, minGrowth: 100 });
    keeper.start();
    try {
      await grow(db, 'rm_timed.items', 200);
      const deadline = Date.now() + 10_000;
      while (!(await analyzedAt(db, 'rm_timed', 'items')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await analyzedAt(db, 'rm_timed', 'items')).not.toBeNull();
    } finally {
      await keeper.stop();
    }
  });

  it('analyzeSchema analyzes every table of a schema (a rebuilt read model before it goes live)', async () => {
    await db.pool.query('CREATE SCHEMA rm_rebuilt; CREATE TABLE rm_rebuilt.a (k integer PRIMARY KEY, doc jsonb NOT NULL); CREATE TABLE rm_rebuilt.b (k integer)');
    await analyzeSchema(db.pool, 'rm_rebuilt');
    expect(await analyzedAt(db, 'rm_rebuilt', 'a')).not.toBeNull();
    expect(await analyzedAt(db, 'rm_rebuilt', 'b')).not.toBeNull();
  });

  it('a pool made for generic plans runs prepared statements on them', async () => {
    const generic = createPool(db.url, 1, { genericPlans: true });
    try {
      expect((await generic.query<{ plan_cache_mode: string }>('SHOW plan_cache_mode')).rows[0].plan_cache_mode).toBe('force_generic_plan');
      expect((await db.pool.query<{ plan_cache_mode: string }>('SHOW plan_cache_mode')).rows[0].plan_cache_mode).toBe('auto');
    } finally {
      await generic.end();
    }
  });
});
