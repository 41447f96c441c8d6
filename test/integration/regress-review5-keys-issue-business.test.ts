// Regression review 5 (2026-11-27): `keys issue` checks the company and its user in the business read model
// (rm_business.companies / rm_business.users, companyExists / getCompanyUser), but catches up only `accounts`.
// A company whose events are appended and not yet projected (a seed killed after its appends, no serve running)
// was then refused "no company N" (found by a review of the change, mended: it catches up `business`).
import { handleCommand } from '../../src/commands/handle';
import { companyDecider, companyStreamId } from '../../src/commands/provisioning/company/decider';
import { fixtureSchema } from '../../src/commands/provisioning/fixture';
import { companyCommand } from '../../src/commands/provisioning/from-fixture';
import { issueApiKey } from '../../src/commands/provisioning/keys';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { exampleFixture, SECOND, secondCompany } from '../support/provisioning';
import { createTestContext, type TestContext } from '../support/services';

jest.setTimeout(120_000);

let t: TestContext;

afterAll(() => t.close());

it('issues a key for a company and user whose events are appended but not yet projected (as the CLI: no runner loops)', async () => {
  t = await createTestContext({ runner: false });
  await seedFixture(t.services, exampleFixture(), { actor: 'test' });
  // a seed of the second company cut short after its company append: nothing caught up its read models
  const second = fixtureSchema.parse({ companies: [{ ...secondCompany(), apiKeys: [], phoneNumbers: [] }] }).companies[0];
  await handleCommand(t.services.store, companyStreamId(SECOND.companyId), companyDecider, companyCommand(second), { actor: 'test', companyId: SECOND.companyId, now: t.services.now });

  const issued = await issueApiKey(t.services, { scope: 'company', companyId: SECOND.companyId, userId: 8, name: 'after a cut seed' }, { actor: 'test' });
  expect(issued.keyId).toEqual(expect.any(String));
});
