// An operator's `keys issue` or `keys list` waits only for the read models it reads. Found in review (2026-11-27):
// run while another process rebuilt the rate-limits read model after a version change, `keys issue` waited for the
// whole of that rebuild (59 s for 80,000 events) and, past 60 s, failed with READ_MODELS_BEHIND without a key.
import { issueApiKey, listKeys } from '../../src/commands/provisioning/keys';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXAMPLE, exampleFixture } from '../support/provisioning';
import { createTestContext, type TestContext } from '../support/services';

jest.setTimeout(120_000);

let t: TestContext;

afterAll(() => t.close());

it("seeds, issues and lists keys while the rate-limits read model is held in another process's rebuild", async () => {
  t = await createTestContext({ runner: false }); // as the CLI: no runner loops of its own, catch-up on demand
  const elsewhere = await t.db.pool.connect();
  try {
    // another process is rebuilding ratelimits for a new version: it holds the guard, the checkpoint has the old version
    await elsewhere.query(`SELECT pg_advisory_lock(hashtext('rebuild:ratelimits'))`);
    await t.db.pool.query(`UPDATE projections.checkpoints SET version = version - 1 WHERE name = 'ratelimits'`);

    await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    const issued = await issueApiKey(t.services, { scope: 'company', companyId: EXAMPLE.companyId, name: 'during a rebuild' }, { actor: 'test' });
    const listed = await listKeys(t.services, EXAMPLE.companyId);
    expect(listed.find((k) => k.keyId === issued.keyId)).toMatchObject({ name: 'during a rebuild', status: 'active', companyId: EXAMPLE.companyId });
    expect((await t.db.pool.query(`SELECT version FROM projections.checkpoints WHERE name = 'ratelimits'`)).rows[0].version)
      .toBeLessThan(t.services.runner.named(['ratelimits'])[0].version); // left to the other process's rebuild
  } finally {
    await elsewhere.query('SELECT pg_advisory_unlock_all()');
    elsewhere.release();
  }
});
