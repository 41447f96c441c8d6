import { allProjections } from '../../src/projections/registry';
import { rebuildProjection } from '../../src/projections/rebuild';
import { lockKeyOf } from '../../src/projections/store';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { EXAMPLE, twoCompanyFixture } from '../support/provisioning';
import { BUSINESS_CHANGED_CHANNEL, isChanging } from '../../src/projections/change-signals';
import { eventually, waitUntil } from '../support/sends';

// A rebuild's swap replaces a read model's tables (a version change may show other data) and used to tell the read
// caches nothing: an answer cached from the old tables was served until the cache's 60-s backstop. The swap now
// notifies every cache channel with `*` in its transaction.

const EXAMPLE_NAME = 'Clinica Norte'; // the fixture's name of EXAMPLE's company

describe('a projection rebuild and the read caches', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const info = async () => (await t.app.inject({ method: 'GET', url: '/api/v1/business-info/', headers: { 'x-api-key': EXAMPLE.key } })).json().name as string;
  /** the rebuild's swap waits for the projection's lock (taken by the test) */
  const swapWaiting = async () => (await t.db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
        AND query LIKE 'SELECT pg_advisory_xact_lock(hashtext($1))%'`)).rows[0].n > 0;

  beforeAll(async () => {
    t = await createTestApp();
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('an answer cached from the old tables while a rebuild waited for its swap is not served after the swap', async () => {
    const business = allProjections.find((p) => p.name === 'business')!;
    // hold the projection's lock, which the swap takes: the replay (whose batches notify as they apply) runs, then waits
    const holder = await t.db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockKeyOf(business.name)]);
    const rebuilt = rebuildProjection(t.db.pool, t.services.runner.reader, business, {});
    try {
      // the replay is done once the rebuild waits for the swap's lock, and its "changing" marks (this process's) have
      // lapsed: what is read next is cached (a fixed 2.5-s pause stood for both before)
      await waitUntil(async () => (await swapWaiting()) || undefined, 30_000, 'the rebuild to wait for its swap');
      await waitUntil(async () => !isChanging(BUSINESS_CHANGED_CHANNEL, EXAMPLE.companyId) || undefined, 30_000, 'the marks to lapse');
      // the live tables read now differ from what the swap brings (as a new version's tables may), and get cached
      await t.db.pool.query(`UPDATE rm_business.companies SET name = 'stale name' WHERE company_id = $1`, [EXAMPLE.companyId]);
      expect(await info()).toBe('stale name');
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    await rebuilt;
    // the swap's notification drops the stale answer: well within the cache's 60-s backstop (the bound without the
    // fix), however slowly a loaded machine brings it (a bound of 40 reads, about 1 s, before)
    expect(await eventually(info, EXAMPLE_NAME)).toBe(EXAMPLE_NAME);
  });
});
