import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CO, bulkFixture } from '../support/bulk';
import { createTestApp } from '../support/services';

// Time review (2026-11-28, docs/business.md "Time and time zones"): the bulk list's `created_before` (a UTC day,
// inclusive) ended at `midnight + interval '1 day'`, which Postgres adds in the session's TimeZone: a calendar day
// there, 25 h on the day a zone leaves daylight saving time. With the database's TimeZone America/New_York (a server
// initialised on a host in that zone has it), a bulk made at 00:30 UTC of the next day was listed. The day is now 24 h.

const BASE = '/api/v1/platform-templates';

describe('bulk list date filters with a database session in a zone with daylight saving time', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let clock = new Date('2026-11-01T12:00:00.000Z');
  const savedOptions = process.env.PGOPTIONS;

  beforeAll(async () => {
    // every pool of the app reads PGOPTIONS when it is made (src/adapters/postgres/pool.ts)
    process.env.PGOPTIONS = '-c TimeZone=America/New_York';
    t = await createTestApp({ now: () => clock });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
    if (savedOptions === undefined) delete process.env.PGOPTIONS;
    else process.env.PGOPTIONS = savedOptions;
  });

  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': BULK_CO.key } });
  const create = async (at: string) => {
    clock = new Date(at);
    const res = await t.app.inject({
      method: 'POST', url: `${BASE}/send-bulk/`, headers: { 'x-api-key': BULK_CO.key },
      payload: { phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome', recipients: [{ phone: '+5491170000001' }] },
    });
    expect(res.statusCode).toBe(202);
    return res.json() as { bulk_send_id: string; created_at: string };
  };
  const listed = async (query: string) => ((await get(`${BASE}/bulk-sends/?${query}`)).json().results as Array<{ id: string; created_at: string }>)
    .map((b) => b.created_at).sort();

  it('the session is in New York, and created_before / created_after are whole UTC days around its DST change', async () => {
    const tz = await t.db.pool.query<{ tz: string }>("SELECT current_setting('TimeZone') AS tz");
    expect(tz.rows[0].tz).toBe('America/New_York');

    // 2026-11-01 is the day New York leaves daylight saving time
    const onTheDay = await create('2026-11-01T12:00:00.000Z');
    const lastMs = await create('2026-11-01T23:59:59.999Z');
    const nextDay = await create('2026-11-02T00:30:00.000Z');
    const dayBefore = await create('2026-10-31T23:59:59.999Z');
    expect([onTheDay.created_at, lastMs.created_at, nextDay.created_at, dayBefore.created_at]).toEqual([
      '2026-11-01T12:00:00.000Z', '2026-11-01T23:59:59.999Z', '2026-11-02T00:30:00.000Z', '2026-10-31T23:59:59.999Z',
    ]);

    expect(await listed('created_before=2026-11-01')).toEqual(['2026-10-31T23:59:59.999Z', '2026-11-01T12:00:00.000Z', '2026-11-01T23:59:59.999Z']);
    expect(await listed('created_after=2026-11-01&created_before=2026-11-01')).toEqual(['2026-11-01T12:00:00.000Z', '2026-11-01T23:59:59.999Z']);
    expect(await listed('created_after=2026-11-02')).toEqual(['2026-11-02T00:30:00.000Z']);
    expect(await listed('created_before=2026-10-31')).toEqual(['2026-10-31T23:59:59.999Z']);
  });
});
