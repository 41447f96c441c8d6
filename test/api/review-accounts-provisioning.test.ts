import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { countEvents, EXAMPLE, twoCompanyFixture } from '../support/provisioning';

// Review of the business read endpoints against what provisioning lets in. Each case gets a fresh database: the
// defects below leave the `business` projection failing for good.

const NOW = new Date('2026-03-01T10:00:00.000Z');

describe('provisioning values the business read model cannot hold', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeEach(async () => {
    t = await createTestApp({ now: () => NOW });
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
  });
  afterEach(async () => {
    await t?.close();
  });

  const info = () => t.app.inject({ method: 'GET', url: '/api/v1/business-info/', headers: { 'x-api-key': EXAMPLE.key } });
  const holiday = (over: object) => ({
    id: 33, name: 'Extra', description: '', date: '2026-07-09', branches: [], attentionTarget: 'ALL', hasCustomHours: false,
    startTime: null, finishAt: null, isActive: true, ...over,
  });

  /** The document is rejected naming `path`, nothing is appended, and later provisioning still reaches the reads. */
  const expectRejectedAndStillServing = async (doc: any, path: string) => {
    const before = await countEvents(t.services.pool);
    await expect(seedFixture(t.services, doc, { actor: 'test' })).rejects.toThrow(path);
    expect(await countEvents(t.services.pool)).toBe(before);
    const renamed = twoCompanyFixture();
    renamed.companies[0].name = 'Clinica Norte SRL';
    await seedFixture(t.services, renamed, { actor: 'test' });
    expect((await info()).json().name).toBe('Clinica Norte SRL');
  };

  // year 0 passes z.iso.date() but Postgres has no year 0: the business projection would fail on the event for ever
  it('a holiday dated 0000-01-01 is rejected by validation, not appended', async () => {
    const doc = twoCompanyFixture();
    doc.companies[0].holidays.push(holiday({ date: '0000-01-01' }));
    await expectRejectedAndStillServing(doc, 'companies[0].holidays[2].date');
  });

  // the read models store ids as Postgres integer: a larger id would fail the projection for ever
  it('a holiday id over 2^31 - 1 is rejected by validation, not appended', async () => {
    const doc = twoCompanyFixture();
    doc.companies[0].holidays.push(holiday({ id: 2_147_483_648 }));
    await expectRejectedAndStillServing(doc, 'companies[0].holidays[2].id');
  });

});
