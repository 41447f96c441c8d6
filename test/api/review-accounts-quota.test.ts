import { seedFixture } from '../../src/commands/provisioning/seed';
import { accountsProjection, recordQuotaUses } from '../../src/projections/accounts/projection';
import { withTransaction } from '../../src/shared/tx';
import { createTestApp } from '../support/services';
import { SECOND, twoCompanyFixture } from '../support/provisioning';

// Review of GET /api/v1/business-accounts/: the quota's usagePercentage near the limit. Rounded to two decimals, a
// TIER_100000 number with 99,995..99,999 recipients showed 100 % while it still had room (remaining > 0,
// canSend true): a client stopping at 100 % stopped early, one reading "full" and "can send" got both.

const NOW = new Date('2026-03-01T10:00:00.000Z');

describe('business-accounts quota near the limit', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => NOW });
    const doc = twoCompanyFixture();
    doc.companies[1].phoneNumbers[0].messagingLimitTier = 'TIER_100000';
    await seedFixture(t.services, doc, { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const quota = async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/business-accounts/', headers: { 'x-api-key': SECOND.key } });
    expect(res.statusCode).toBe(200);
    return res.json().phoneNumbers[0].quota;
  };
  /** What the bulk dispatcher records through the accounts projection: `count` new recipients of number 41. */
  const sentTo = (from: number, count: number) =>
    withTransaction(t.services.pool, async (tx) => {
      await tx.query(`SET LOCAL search_path TO ${accountsProjection.schema}, public`);
      const at = new Date(NOW.getTime() - 3600_000);
      await recordQuotaUses(tx, 41, Array.from({ length: count }, (_, i) => ({ recipient: `+54911${String(from + i).padStart(8, '0')}`, at })));
    });

  it('shows under 100 % while the number can still send, and 100 % once it cannot', async () => {
    await sentTo(0, 99_999);
    expect(await quota()).toEqual({ dailyLimit: 100_000, uniqueNumbersSent24h: 99_999, remaining: 1, usagePercentage: 99.99, canSend: true });
    await sentTo(99_999, 1);
    expect(await quota()).toEqual({ dailyLimit: 100_000, uniqueNumbersSent24h: 100_000, remaining: 0, usagePercentage: 100, canSend: false });
  });
});
