import { allProjections } from '../../src/projections/registry';
import { rebuildProjection } from '../../src/projections/rebuild';
import { lockKeyOf } from '../../src/projections/store';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { EXAMPLE, twoCompanyFixture } from '../support/provisioning';

// Regression review 13. A rebuild's swap tells the read caches to drop everything (2f09539: business, accounts and
// contacts with `*`), but not the API-key cache of every process (channel `apikeys_changed`, whose payload is a key
// hash, or none for everything; `*` would drop nothing): a key looked up from the old tables while the rebuild waited
// for its swap kept that answer for up to 30 s after it (a key the new version shows revoked still accepted, or, as
// here, one it shows valid still refused).

describe('regress-review13: a rebuild of the API keys and the API-key cache', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const status = async () => (await t.app.inject({ method: 'GET', url: '/api/v1/business-info/', headers: { 'x-api-key': EXAMPLE.key } })).statusCode;

  beforeAll(async () => {
    t = await createTestApp();
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a key looked up from the old tables while the rebuild waited for its swap is looked up again after it', async () => {
    const apikeys = allProjections.find((p) => p.name === 'apikeys')!;
    expect(await status()).toBe(200);
    // hold the projection's lock, which the swap takes: the replay (whose batches notify as they apply) runs, then waits
    const holder = await t.db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockKeyOf(apikeys.name)]);
    const rebuilt = rebuildProjection(t.db.pool, t.services.runner.reader, apikeys, {});
    try {
      await new Promise((r) => setTimeout(r, 2500)); // the replay's notifications arrived
      // the live tables read now differ from what the swap brings (as a new version's tables may), and get cached
      await t.db.pool.query('UPDATE rm_apikeys.keys SET revoked = true WHERE company_id = $1', [EXAMPLE.companyId]);
      await new Promise((r) => setTimeout(r, 100));
      expect(await status()).toBe(401);
      expect(await status()).toBe(401);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    await rebuilt;
    const seen: number[] = [];
    for (let i = 0; i < 80 && seen.at(-1) !== 200; i++) {
      seen.push(await status());
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(seen.at(-1)).toBe(200);
  }, 60_000);
});
