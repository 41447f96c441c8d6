import { randomUUID } from 'node:crypto';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { companyStreamId } from '../../src/commands/provisioning/company/decider';
import { getBusinessInfo } from '../../src/projections/business/queries';
import { createTestContext, type TestContext } from '../support/services';

// Review 15: a time zone in another letter case was stored as written. Now a fixture's zone is stored as the IANA
// database spells it; a company whose events hold another spelling (provisioned before) keeps it until its document
// is seeded again, which appends one CompanyProfileChanged with the IANA spelling (docs/provisioning.md, "Time zones").

const COMPANY = 15_015;
const profile = (timezone: string) => ({
  companyId: COMPANY, name: 'Zoned Store', email: '', phone: '', website: '', address: '', description: '', timezone,
  companySize: null, companyTypes: [], categories: [],
});
const fixture = (timezone: string) => ({ companies: [{ id: COMPANY, name: 'Zoned Store', timezone }] });

describe('review15: time zones as the IANA database spells them (real Postgres)', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a company registered with a lower-case zone: seeding its document again stores the IANA spelling, once', async () => {
    // as a seed before the change appended it
    const id = randomUUID();
    await t.services.store.append(companyStreamId(COMPANY), [{
      type: 'CompanyRegistered', data: profile('america/argentina/buenos_aires'),
      metadata: { eventId: id, correlationId: id, causationId: null, companyId: COMPANY, actor: 'test', at: '2026-01-01T00:00:00.000Z' },
    }], 'no_stream');

    await seedFixture(t.services, fixture('america/argentina/buenos_aires'), { actor: 'test' });
    const stream = await t.services.store.readStream(companyStreamId(COMPANY));
    expect(stream.map((e) => [e.type, (e.data as { timezone: string }).timezone])).toEqual([
      ['CompanyRegistered', 'america/argentina/buenos_aires'],
      ['CompanyProfileChanged', 'America/Argentina/Buenos_Aires'],
    ]);
    expect((await getBusinessInfo(t.db.pool, COMPANY))?.timezone).toBe('America/Argentina/Buenos_Aires');

    // the same document in another case again: nothing to change
    const again = await seedFixture(t.services, fixture('AMERICA/ARGENTINA/BUENOS_AIRES'), { actor: 'test' });
    expect(again.appended).toBe(0);
    expect(await t.services.store.readStream(companyStreamId(COMPANY))).toHaveLength(2);
  });
});
