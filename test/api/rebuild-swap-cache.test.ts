import { allProjections } from '../../src/projections/registry';
import { rebuildProjection } from '../../src/projections/rebuild';
import { lockKeyOf } from '../../src/projections/store';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { EXAMPLE, twoCompanyFixture } from '../support/provisioning';

// A rebuild's swap replaces a read model's tables (a version change may show other data) and used to tell the read
// caches nothing: an answer cached from the old tables was served until the cache's 60-s backstop. The swap now
// notifies every cache channel with `*` in its transaction.

const EXAMPLE_NAME = 'Clinica Norte'; // the fixture's name of EXAMPLE's company

describe('a projection rebuild and the read caches', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const info = async () => (await t.app.inject({ method: 'GET', url: '/api/v1/business-info/', headers: { 'x-api-key': EXAMPLE.key } })).json().name as string;

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
      await new Promise((r) => setTimeout(r, 2500)); // the replay's notifications arrived and its "changing" marks lapsed
      // the live tables read now differ from what the swap brings (as a new version's tables may), and get cached
      await t.db.pool.query(`UPDATE rm_business.companies SET name = 'stale name' WHERE company_id = $1`, [EXAMPLE.companyId]);
      expect(await info()).toBe('stale name');
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    await rebuilt;
    const seen: string[] = [];
    for (let i = 0; i < 40 && seen.at(-1) !== EXAMPLE_NAME; i++) {
      seen.push(await info());
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(seen.at(-1)).toBe(EXAMPLE_NAME);
  });
});
