import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { START } from '../../src/ports/event-store';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Review 15e of 509d976: both reads of the log join the horizon (one row) with the events below it. Written as a plain
// subquery, Postgres pulled it up and computed `cluster_xmin` (pg_snapshot_xmin(pg_current_snapshot()), a copy of the
// snapshot each time) again for every event returned: a batch of 1,000 events cost about 1.5 times the read before
// the change. The horizon must stay a node of its own, computed once, whose result the join passes on.

interface PlanNode {
  'Node Type': string;
  Output?: string[];
  Plans?: PlanNode[];
}

describe('review 15e: the horizon of a read of the log is computed once, not once per event', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it.each([
    ['es_read_all', 60_000],
    ['es_read_all_own_database', 0],
  ])('%s: the join\'s outer side answers the horizon and cluster_xmin', async (name, pinnedHorizonMs) => {
    const one = createPool(db.url, 1);
    try {
      const store = new PostgresEventStore(one, { pinnedHorizonMs });
      await store.readAll(START, 10);
      await store.readAll(START, 10); // the second read is the own-database one when pinnedHorizonMs is 0
      const { rows } = await one.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements WHERE name = $1', [name]);
      expect(rows).toHaveLength(1);
      await one.query('SET plan_cache_mode = force_generic_plan');
      await one.query(`PREPARE review15e_read AS ${rows[0].statement}`);
      const explained = await one.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
        'EXPLAIN (VERBOSE, COSTS OFF, FORMAT JSON) EXECUTE review15e_read(-1, -1, 10)',
      );
      const top = explained.rows[0]['QUERY PLAN'][0].Plan;
      expect(top['Node Type']).toBe('Nested Loop');
      const outer = top.Plans![0];
      // pulled up, the outer side answered nothing (cluster-wide: an empty Result) or only the snapshot (own database),
      // and the join's output computed cluster_xmin for each row
      expect(outer.Output ?? []).toHaveLength(2);
    } finally {
      await one.end();
    }
  });
});
