import { computeQuota, UNLIMITED_DAILY_LIMIT } from '../../../src/projections/accounts/queries';
import { companySizeDisplay, daysDisplay } from '../../../src/projections/business/labels';

describe('daysDisplay', () => {
  it.each<[string[], string | null, string]>([
    [['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY'], null, 'Monday to Friday'],
    [['FRIDAY', 'MONDAY', 'WEDNESDAY', 'TUESDAY', 'THURSDAY'], null, 'Monday to Friday'],
    [['MONDAY', 'WEDNESDAY'], null, 'Monday, Wednesday'],
    [['SATURDAY', 'SUNDAY'], null, 'Saturday, Sunday'],
    [['MONDAY', 'TUESDAY', 'WEDNESDAY', 'SATURDAY', 'SUNDAY'], null, 'Monday to Wednesday, Saturday, Sunday'],
    [['MONDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY'], null, 'Monday, Wednesday to Saturday'],
    [['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY', 'SUNDAY'], null, 'Every day'],
    [['SUNDAY'], null, 'Sunday'],
    [[], '2026-12-05', '2026-12-05'],
    [[], null, ''],
  ])('%j %s -> %s', (days, date, label) => {
    expect(daysDisplay(days, date)).toBe(label);
  });
});

describe('companySizeDisplay', () => {
  it.each([
    ['MICRO', '1-10 employees'], ['SMALL', '11-50 employees'], ['MEDIUM', '51-250 employees'],
    ['LARGE', '251-1000 employees'], ['ENTERPRISE', '1000+ employees'],
  ])('%s -> %s', (size, label) => expect(companySizeDisplay(size)).toBe(label));
  it('null stays null', () => expect(companySizeDisplay(null)).toBeNull());
});

describe('computeQuota', () => {
  it('a tier limit, used, remaining, percentage with two decimals', () => {
    expect(computeQuota('TIER_250', 0)).toEqual({ dailyLimit: 250, uniqueNumbersSent24h: 0, remaining: 250, usagePercentage: 0, canSend: true });
    expect(computeQuota('TIER_1000', 1)).toEqual({ dailyLimit: 1000, uniqueNumbersSent24h: 1, remaining: 999, usagePercentage: 0.1, canSend: true });
    expect(computeQuota('TIER_50', 1).usagePercentage).toBe(2);
    expect(computeQuota('TIER_10000', 3333).usagePercentage).toBe(33.33);
    expect(computeQuota('TIER_100000', 2).usagePercentage).toBe(0);
  });

  it('exhausted and over-used quotas cannot send', () => {
    expect(computeQuota('TIER_50', 50)).toEqual({ dailyLimit: 50, uniqueNumbersSent24h: 50, remaining: 0, usagePercentage: 100, canSend: false });
    expect(computeQuota('TIER_50', 70)).toEqual({ dailyLimit: 50, uniqueNumbersSent24h: 70, remaining: 0, usagePercentage: 100, canSend: false });
  });

  it('TIER_UNLIMITED: the largest exact integer, the same formulas', () => {
    expect(UNLIMITED_DAILY_LIMIT).toBe(9007199254740991);
    expect(computeQuota('TIER_UNLIMITED', 1_000_000)).toEqual({
      dailyLimit: 9007199254740991, uniqueNumbersSent24h: 1_000_000, remaining: 9007199253740991, usagePercentage: 0, canSend: true,
    });
  });
});
