import { seedFixture } from '../../src/commands/provisioning/seed';
import { accountsProjection, recordQuotaUse } from '../../src/projections/accounts/projection';
import { BUSINESS_CHANGED_CHANNEL } from '../../src/projections/change-signals';
import { withTransaction } from '../../src/shared/tx';
import { createTestApp } from '../support/services';
import { eventually } from '../support/sends';
import { EXAMPLE, exampleFixture } from '../support/provisioning';

// The per-process read cache of the business endpoints: hits cost no query; writes (of this process or, by
// notification, of others) are visible to the next read; quota use expires as the 24 h window slides.

const T0 = new Date('2026-03-01T10:00:00.000Z');
/** marks of changes in progress hold 2 s (src/projections/change-signals.ts) */
const settle = () => new Promise((r) => setTimeout(r, 2_100));

describe('read cache of the business endpoints', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let clock = T0;
  let queries: string[] = [];

  beforeAll(async () => {
    t = await createTestApp({ now: () => clock });
    await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    const original = t.services.pool.query.bind(t.services.pool);
    jest.spyOn(t.services.pool, 'query').mockImplementation(((config: unknown, ...rest: unknown[]) => {
      // read-model queries only: the projection runner's polls of the event store (es_*) are not reads of the endpoints
      const name = config && typeof config === 'object' && 'name' in config ? String((config as { name: string }).name) : undefined;
      if (name && !name.startsWith('es_')) queries.push(name);
      return (original as (...a: unknown[]) => unknown)(config, ...rest);
    }) as never);
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': EXAMPLE.key } });

  it('serves repeated reads from memory', async () => {
    await settle();
    queries = [];
    for (let i = 0; i < 3; i++) {
      expect((await get('/api/v1/business-hours/')).statusCode).toBe(200);
      expect((await get('/api/v1/business-info/')).statusCode).toBe(200);
      expect((await get('/api/v1/business-accounts/')).statusCode).toBe(200);
      expect((await get('/api/v1/holidays/?from=2026-12-25')).json().map((h: { id: number }) => h.id)).toEqual([31]);
      expect((await get('/api/v1/holidays/')).json().map((h: { id: number }) => h.id)).toEqual([32, 31]);
    }
    expect(queries.sort()).toEqual(['accounts_business_accounts', 'business_holidays', 'business_hours', 'business_info']);
  });

  it('a seed of this process is visible to the next read', async () => {
    const doc = exampleFixture();
    doc.companies[0].branches[0].name = 'Sede Florida';
    doc.companies[0].name = 'Clinica Norte SRL';
    doc.companies[0].phoneNumbers[0].messagingLimitTier = 'TIER_1000';
    await seedFixture(t.services, doc, { actor: 'test' });
    expect((await get('/api/v1/business-hours/')).json()[0].branchName).toBe('Sede Florida');
    expect((await get('/api/v1/business-info/')).json().name).toBe('Clinica Norte SRL');
    const accounts = (await get('/api/v1/business-accounts/')).json();
    expect([accounts.companyName, accounts.phoneNumbers[0].quota.dailyLimit]).toEqual(['Clinica Norte SRL', 1000]);
  });

  it('a change notified by another process drops the entry when the notification arrives', async () => {
    await settle();
    expect((await get('/api/v1/business-hours/')).json()[1].branchName).toBe('Online');
    expect((await get('/api/v1/business-hours/')).json()[1].branchName).toBe('Online'); // cached
    await t.db.pool.query(
      `UPDATE rm_business.branches SET name = 'Online 24/7' WHERE company_id = 101 AND branch_id = 2
       RETURNING pg_notify('${BUSINESS_CHANGED_CHANNEL}', company_id::text)`,
    );
    // when it arrives: within 20 s here (100 reads, about 1 s, before: a loaded machine can be slower), well inside the
    // cache's 60-s backstop, the bound of a cache that missed it
    expect(await eventually(async () => (await get('/api/v1/business-hours/')).json()[1].branchName, 'Online 24/7')).toBe('Online 24/7');
  });

  it('quota use: a send is visible at once; the cached use expires when its recipient leaves the window', async () => {
    const use = (recipient: string, at: Date) =>
      withTransaction(t.db.pool, async (tx) => {
        await tx.query(`SET LOCAL search_path TO ${accountsProjection.schema}, public`);
        await recordQuotaUse(tx, { numberId: 21, recipient, at });
      });
    await use('+5491100000001', new Date(T0.getTime() - 3600_000));
    expect((await get('/api/v1/business-accounts/')).json().phoneNumbers[0].quota.uniqueNumbersSent24h).toBe(1);
    await settle();
    queries = [];
    expect((await get('/api/v1/business-accounts/')).json().phoneNumbers[0].quota.uniqueNumbersSent24h).toBe(1);
    clock = new Date(T0.getTime() + 22 * 3600_000);
    expect((await get('/api/v1/business-accounts/')).json().phoneNumbers[0].quota.uniqueNumbersSent24h).toBe(1);
    expect(queries).toEqual(['accounts_business_accounts']); // loaded once, then from memory
    clock = new Date(T0.getTime() + 23 * 3600_000); // the send of T0 - 1 h is 24 h old now
    expect((await get('/api/v1/business-accounts/')).json().phoneNumbers[0].quota.uniqueNumbersSent24h).toBe(0);
    expect(queries).toEqual(['accounts_business_accounts', 'accounts_business_accounts']);
  });

  it('revocation still takes effect on the next request', async () => {
    const doc = exampleFixture();
    doc.companies[0].apiKeys[0].active = false;
    doc.companies[0].branches[0].name = 'Sede Florida';
    doc.companies[0].name = 'Clinica Norte SRL';
    doc.companies[0].phoneNumbers[0].messagingLimitTier = 'TIER_1000';
    await seedFixture(t.services, doc, { actor: 'test' });
    expect((await get('/api/v1/business-hours/')).statusCode).toBe(401);
  });
});
