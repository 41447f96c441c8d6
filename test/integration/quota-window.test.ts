import { accountsProjection, recordQuotaUse } from '../../src/projections/accounts/projection';
import { quotaOf, uniqueRecipientsSent24h } from '../../src/projections/accounts/queries';
import { withTransaction } from '../../src/shared/tx';
import { createTestContext, type TestContext } from '../support/services';

// The rolling 24 h window of unique recipients (minute buckets + the exact edge minute), as the accounts
// projection records it and the quota queries read it.

const NOW = new Date('2026-03-01T10:00:30.500Z');
const START = NOW.getTime() - 24 * 3600_000; // 2026-02-28T10:00:30.500Z, excluded
const at = (ms: number) => new Date(START + ms);

describe('quota window', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext({ runner: false });
  });
  afterAll(async () => {
    await t?.close();
  });

  const use = (numberId: number, recipient: string, when: Date) =>
    withTransaction(t.db.pool, async (tx) => {
      await tx.query(`SET LOCAL search_path TO ${accountsProjection.schema}, public`);
      await recordQuotaUse(tx, { numberId, recipient, at: when });
    });
  const used = (numberId: number, now = NOW) => uniqueRecipientsSent24h(t.db.pool, numberId, now);

  it('counts exactly at the window start, inside the edge minute and in whole minutes', async () => {
    await use(1, 'a', at(0)); // exactly 24 h ago: out
    await use(1, 'b', at(-1)); // before: out
    await use(1, 'c', at(1)); // edge minute, inside
    await use(1, 'd', at(29_000)); // edge minute, inside (bucket starts before the window)
    await use(1, 'e', at(-20_000)); // edge minute's bucket, but before the start: out
    await use(1, 'f', at(60_000)); // next minute
    await use(1, 'g', new Date(NOW.getTime() - 1)); // just now
    expect(await used(1)).toBe(4);
    // 30 s later the window starts in the next minute: c and d have left it
    expect(await used(1, new Date(NOW.getTime() + 30_000))).toBe(2);
  });

  it('a recipient counts once, at its latest send; older or repeated uses change nothing', async () => {
    await use(2, 'x', at(-3600_000)); // out of the window
    expect(await used(2)).toBe(0);
    await use(2, 'x', at(3600_000)); // moves into the window
    await use(2, 'x', at(7200_000));
    await use(2, 'x', at(7200_000)); // redelivered
    await use(2, 'x', at(10)); // older than its latest: ignored
    expect(await used(2)).toBe(1);
    const buckets = await t.db.pool.query('SELECT minute, recipients FROM rm_accounts.quota_minutes WHERE number_id = 2 AND recipients <> 0');
    expect(buckets.rows.map((r) => [r.minute.toISOString(), r.recipients])).toEqual([['2026-02-28T12:00:00.000Z', 1]]);
  });

  it('prunes what no window can reach once a new minute starts', async () => {
    await use(3, 'old', new Date(NOW.getTime() - 48 * 3600_000));
    await use(3, 'new', NOW);
    const rows = await t.db.pool.query('SELECT recipient FROM rm_accounts.quota_recipients WHERE number_id = 3');
    expect(rows.rows.map((r) => r.recipient)).toEqual(['new']);
    expect(await used(3)).toBe(1);
  });

  it('quotaOf applies the tier', async () => {
    expect(await quotaOf(t.db.pool, 1, 'TIER_50', NOW)).toEqual({ dailyLimit: 50, uniqueNumbersSent24h: 4, remaining: 46, usagePercentage: 8, canSend: true });
    expect(await quotaOf(t.db.pool, 99, 'TIER_250', NOW)).toEqual({ dailyLimit: 250, uniqueNumbersSent24h: 0, remaining: 250, usagePercentage: 0, canSend: true });
  });
});
