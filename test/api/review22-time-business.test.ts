import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { EXAMPLE, twoCompanyFixture } from '../support/provisioning';

// Review 22 (time and calendars), holidays' `from`/`to` as the spec words them: "both YYYY-MM-DD and inclusive
// (holidays with date >= from and <= to)"; its only 400 is a value not in that form. Guards of what was found sound
// (docs/business.md, "Time and time zones").

const SEEDED_AT = '2026-03-01T10:00:00.000Z';

describe('holidays: the range as calendar dates', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(SEEDED_AT) });
    const doc = twoCompanyFixture();
    doc.companies[0].holidays.push(
      { id: 51, name: 'Leap day', date: '2028-02-29', attentionTarget: 'ALL' },
      { id: 52, name: 'Overnight reduced hours', date: '2026-12-31', attentionTarget: 'ALL', hasCustomHours: true, startTime: '22:00:00', finishAt: '02:00:00' },
    );
    await seedFixture(t.services, doc, { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const holidays = (query: string) =>
    t.app.inject({ method: 'GET', url: `/api/v1/holidays/${query}`, headers: { 'x-api-key': EXAMPLE.key } });
  const ids = async (query: string) => {
    const res = await holidays(query);
    expect(res.statusCode).toBe(200);
    return (res.json() as Array<{ id: number }>).map((h) => h.id);
  };

  it('from equal to to is that one day; from after to is an empty list, not an error', async () => {
    expect(await ids('?from=2026-12-24&to=2026-12-24')).toEqual([32]);
    expect(await ids('?from=2026-12-25&to=2026-12-24')).toEqual([]);
    expect(await ids('?from=2027-01-01&to=2026-01-01')).toEqual([]);
  });

  it('a 29 February only in leap years; an instant, a time or an offset is not a date', async () => {
    expect(await ids('?from=2028-02-29&to=2028-02-29')).toEqual([51]);
    for (const bad of ['2027-02-29', '2026-11-28T00:00:00Z', '2026-11-28T24:00:00Z', '2026-12-24+01:00', '2026-02-30']) {
      const res = await holidays(`?from=${encodeURIComponent(bad)}`);
      expect({ bad, status: res.statusCode, body: res.json() }).toEqual({ bad, status: 400, body: { error: 'from: must be a date YYYY-MM-DD' } });
    }
  });

  it('a holiday whose reduced hours run past midnight is listed on its own date only, its times as provisioned', async () => {
    const res = await holidays('?from=2026-12-31&to=2026-12-31');
    expect(res.json().map((h: any) => [h.id, h.date, h.hasCustomHours, h.startTime, h.finishAt])).toEqual([[52, '2026-12-31', true, '22:00:00', '02:00:00']]);
    expect(await ids('?from=2027-01-01&to=2027-01-01')).toEqual([]);
  });
});
