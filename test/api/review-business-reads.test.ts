import { createPool } from '../../src/adapters/postgres/pool';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { getBusinessHours, getHolidays } from '../../src/projections/business/queries';
import { createTestApp } from '../support/services';
import { EXAMPLE, SECOND, secondCompany, twoCompanyFixture } from '../support/provisioning';

// Review of the business read endpoints (business-accounts, business-info, business-hours, holidays) against the spec
// and the fixture contract: exact field order and types, empty companies, ids at the int4 limit, trailing slashes and
// query-string junk, holidays across year boundaries, tenant isolation. Decisions: docs/business.md.

const SEEDED_AT = '2026-03-01T10:00:00.000Z';
const MAX = 2_147_483_647;
const BIG_KEY = 'sbk_bigbigbigbigbigbig00000000000';
const EMPTY_KEY = 'sbk_emptyemptyempty000000000';

/** A company whose every id is 2^31 - 1 (the largest the fixture and the read models take). */
function maxIdCompany(): any {
  const c = secondCompany();
  c.id = MAX;
  c.users[0].id = MAX;
  c.apiKeys[0] = { ...c.apiKeys[0], key: BIG_KEY, userId: MAX };
  c.contactLists[0].id = MAX;
  c.branches[0].id = MAX;
  c.branches[0].schedules[0].id = MAX;
  c.holidays[0] = { ...c.holidays[0], id: MAX, branches: [MAX], attentionTarget: 'BRANCH' };
  c.phoneNumbers[0] = { ...c.phoneNumbers[0], id: MAX, phoneNumberId: '2147483647000' };
  c.phoneNumbers[0].templates[0].id = MAX;
  return c;
}

/** A company with nothing but what the fixture requires: every optional field at its default. */
const emptyCompany = () => ({ id: 303, name: 'Empty', timezone: 'UTC', apiKeys: [{ name: 'only key', key: EMPTY_KEY }] });

/** Holidays on a year boundary, a leap day and the DST switches of America/Santiago (midnight does not exist there on 2026-09-06). */
const edgeHolidays = [
  { id: 41, name: 'Nochevieja', date: '2026-12-31', attentionTarget: 'ALL' },
  { id: 42, name: 'Año Nuevo', date: '2027-01-01', attentionTarget: 'ALL' },
  { id: 43, name: 'Bisiesto', date: '2028-02-29', attentionTarget: 'ALL' },
  { id: 44, name: 'DST start (Santiago)', date: '2026-09-06', attentionTarget: 'ALL' },
  { id: 45, name: 'DST end (Santiago)', date: '2026-04-05', attentionTarget: 'ALL' },
];

describe('business read endpoints, reviewed', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(SEEDED_AT) });
    const doc = twoCompanyFixture();
    doc.companies[0].holidays.push(...edgeHolidays);
    doc.companies[0].branches[0].schedules.push(
      { id: 3, days: [], startTime: '00:00:00', finishAt: '23:59:59', isActive: true, description: 'DST day', specificDate: '2026-09-06' },
      { id: 4, days: ['SUNDAY', 'SATURDAY', 'MONDAY'], startTime: '22:00:00', finishAt: '02:00:00', isActive: false, description: 'Overnight', specificDate: null },
    );
    doc.companies.push(maxIdCompany(), emptyCompany());
    await seedFixture(t.services, doc, { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (url: string, key: string | undefined = EXAMPLE.key) =>
    t.app.inject({ method: 'GET', url, headers: key === undefined ? {} : { 'x-api-key': key } });

  describe('exact shapes', () => {
    it('business-accounts: fields in the spec order, integers, a float percentage, booleans', async () => {
      const res = await get('/api/v1/business-accounts/');
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      const body = res.json();
      expect(Object.keys(body)).toEqual(['companyName', 'apiKeyName', 'phoneNumbers']);
      const n = body.phoneNumbers[0];
      expect(Object.keys(n)).toEqual([
        'id', 'phoneNumberId', 'displayPhoneNumber', 'verifiedName', 'businessName', 'isPrimary', 'messagingLimitTier', 'quota', 'templates',
      ]);
      expect(Object.keys(n.quota)).toEqual(['dailyLimit', 'uniqueNumbersSent24h', 'remaining', 'usagePercentage', 'canSend']);
      expect(n.templates.map((x: any) => Object.keys(x))).toEqual([['name', 'language', 'category', 'variables', 'buttons']]);
      expect(Object.keys(n.templates[0].variables[0])).toEqual(['name', 'type', 'position', 'isRequired', 'component']);
      expect(body).toEqual({
        companyName: 'Clinica Norte',
        apiKeyName: 'CRM sync',
        phoneNumbers: [{
          id: 21, phoneNumberId: '109876543210001', displayPhoneNumber: '+54 9 11 4321-0000', verifiedName: 'Clinica Norte',
          businessName: 'Clinica Norte SA', isPrimary: true, messagingLimitTier: 'TIER_250',
          quota: { dailyLimit: 250, uniqueNumbersSent24h: 0, remaining: 250, usagePercentage: 0, canSend: true },
          templates: [{
            name: 'appointment_reminder', language: 'es', category: 'UTILITY',
            variables: [
              { name: 'patient_name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
              { name: 'appointment_at', type: 'DATE_TIME', position: 2, isRequired: true, component: 'BODY' },
              { name: 'booking_code', type: 'TEXT', position: 1, isRequired: false, component: 'BUTTON' },
            ],
            buttons: [{ type: 'URL', text: 'Ver turno', url: 'https://clinicanorte.example/t/{{1}}' }],
          }],
        }],
      });
    });

    it('business-info, business-hours, holidays: fields in the spec order', async () => {
      expect(Object.keys((await get('/api/v1/business-info/')).json())).toEqual([
        'id', 'name', 'email', 'phone', 'website', 'address', 'description', 'timezone', 'companySize', 'companySizeDisplay',
        'companyTypes', 'categories',
      ]);
      const [branch] = (await get('/api/v1/business-hours/')).json();
      expect(Object.keys(branch)).toEqual(['branchId', 'branchName', 'branchType', 'address', 'schedules']);
      expect(Object.keys(branch.schedules[0])).toEqual(['id', 'days', 'daysDisplay', 'startTime', 'finishAt', 'isActive', 'description', 'specificDate']);
      const holiday = (await get('/api/v1/holidays/?from=2026-12-24&to=2026-12-24')).json()[0];
      expect(Object.keys(holiday)).toEqual([
        'id', 'company', 'name', 'description', 'date', 'branches', 'branchesDetail', 'attentionTarget', 'hasCustomHours', 'startTime',
        'finishAt', 'isActive', 'createdAt', 'updatedAt',
      ]);
      expect(Object.keys(holiday.branchesDetail[0])).toEqual(['id', 'company', 'name', 'address', 'phone', 'branchType', 'createdAt', 'updatedAt']);
    });
  });

  describe('a company with nothing but a name, a time zone and a key', () => {
    it('has an empty profile, no branches, no holidays and no numbers: 200 each, never 404 or 500', async () => {
      const info = await get('/api/v1/business-info/', EMPTY_KEY);
      expect(info.statusCode).toBe(200);
      expect(info.json()).toEqual({
        id: 303, name: 'Empty', email: '', phone: '', website: '', address: '', description: '', timezone: 'UTC',
        companySize: null, companySizeDisplay: null, companyTypes: [], categories: [],
      });
      for (const url of ['/api/v1/business-hours/', '/api/v1/holidays/', '/api/v1/holidays/?from=0001-01-01&to=9999-12-31']) {
        const res = await get(url, EMPTY_KEY);
        expect([url, res.statusCode, res.json()]).toEqual([url, 200, []]);
      }
      const accounts = await get('/api/v1/business-accounts/', EMPTY_KEY);
      expect(accounts.statusCode).toBe(200);
      expect(accounts.json()).toEqual({ companyName: 'Empty', apiKeyName: 'only key', phoneNumbers: [] });
    });
  });

  describe('ids at the int4 limit', () => {
    it('2147483647 everywhere reads back as the same JSON integer', async () => {
      expect((await get('/api/v1/business-info/', BIG_KEY)).json()).toMatchObject({ id: MAX });
      expect((await get('/api/v1/business-hours/', BIG_KEY)).json()).toEqual([
        expect.objectContaining({ branchId: MAX, schedules: [expect.objectContaining({ id: MAX })] }),
      ]);
      expect((await get('/api/v1/holidays/', BIG_KEY)).json()).toEqual([
        expect.objectContaining({ id: MAX, company: MAX, branches: [MAX], branchesDetail: [expect.objectContaining({ id: MAX, company: MAX })] }),
      ]);
      const accounts = await get('/api/v1/business-accounts/', BIG_KEY);
      expect(accounts.statusCode).toBe(200);
      expect(accounts.json().phoneNumbers).toEqual([expect.objectContaining({ id: MAX, phoneNumberId: '2147483647000' })]);
    });
  });

  describe('paths and query strings', () => {
    const urls = ['/api/v1/business-accounts/', '/api/v1/business-info/', '/api/v1/business-hours/', '/api/v1/holidays/'];

    it.each(urls)('%s without its trailing slash, with a doubled one or in capitals: 404 {error}', async (url) => {
      for (const variant of [url.slice(0, -1), `${url}/`, url.toUpperCase()]) {
        const res = await get(variant);
        expect([variant, res.statusCode, res.json()]).toEqual([variant, 404, { error: `no route for GET ${variant}` }]);
      }
    });

    it.each(urls)('%s ignores unknown query parameters, company_id included (never another company)', async (url) => {
      const plain = await get(url);
      for (const junk of ['?x=1', '?company_id=202', `?company_id=${MAX}&company=202`, '?&&&', '?__proto__[from]=x&constructor=1', '?a=%ZZ', '?FROM=2030-01-01']) {
        const res = await get(`${url}${junk}`);
        expect([junk, res.statusCode, res.body]).toEqual([junk, 200, plain.body]);
      }
    });

    it.each([
      ['from=2026-12-24&from=2026-12-25', { error: 'from: must be a date YYYY-MM-DD' }],
      ['from=2027-02-29', { error: 'from: must be a date YYYY-MM-DD' }],
      ['to=2026-12-24%20', { error: 'to: must be a date YYYY-MM-DD' }],
      ['from', { error: 'from: must be a date YYYY-MM-DD' }],
      ['from=y&to=x', { error: 'from: must be a date YYYY-MM-DD; to: must be a date YYYY-MM-DD' }],
      ['from=<5,000 digits>', { error: 'from: must be a date YYYY-MM-DD' }],
    ])('holidays?%s: 400 in the plain shape', async (label, body) => {
      const query = label.replace('<5,000 digits>', '9'.repeat(5000));
      const res = await get(`/api/v1/holidays/?${query}`);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual(body);
    });
  });

  describe('holidays by date', () => {
    const datesOf = async (query: string) => (await get(`/api/v1/holidays/${query}`)).json().map((h: any) => h.date);

    it('orders by date across year boundaries and filters inclusively across them', async () => {
      expect(await datesOf('')).toEqual(['2026-04-05', '2026-09-06', '2026-12-24', '2026-12-25', '2026-12-31', '2027-01-01', '2028-02-29']);
      expect(await datesOf('?from=2026-12-31&to=2027-01-01')).toEqual(['2026-12-31', '2027-01-01']);
      expect(await datesOf('?from=2027-01-01')).toEqual(['2027-01-01', '2028-02-29']);
      expect(await datesOf('?to=2026-12-31&from=2026-12-25')).toEqual(['2026-12-25', '2026-12-31']);
      expect(await datesOf('?from=2028-02-29&to=2028-02-29')).toEqual(['2028-02-29']);
      expect(await datesOf('?from=2027-01-02&to=2028-02-28')).toEqual([]);
    });

    it('dates and times of day are the provisioned text, whatever the time zone of the process and of the database session', async () => {
      const before = { TZ: process.env.TZ, PGOPTIONS: process.env.PGOPTIONS };
      const restore = (name: 'TZ' | 'PGOPTIONS') => {
        if (before[name] === undefined) delete process.env[name];
        else process.env[name] = before[name];
      };
      const expected = [[45, '2026-04-05'], [44, '2026-09-06'], [32, '2026-12-24'], [31, '2026-12-25'], [41, '2026-12-31']];
      const edgeSchedules = [
        { id: 3, days: [], daysDisplay: '2026-09-06', startTime: '00:00:00', finishAt: '23:59:59', isActive: true, description: 'DST day', specificDate: '2026-09-06' },
        { id: 4, days: ['SUNDAY', 'SATURDAY', 'MONDAY'], daysDisplay: 'Monday, Saturday, Sunday', startTime: '22:00:00', finishAt: '02:00:00', isActive: false, description: 'Overnight', specificDate: null },
      ];
      try {
        for (const tz of ['America/Santiago', 'Pacific/Kiritimati', 'Pacific/Pago_Pago']) {
          process.env.TZ = tz; // Node applies a changed TZ at once
          // the read model's queries on a session in that zone too
          process.env.PGOPTIONS = `-c TimeZone=${tz}`;
          const pool = createPool(t.db.url, 1);
          try {
            expect((await pool.query('SHOW TimeZone')).rows[0].TimeZone).toBe(tz);
            const holidays = await getHolidays(pool, 101, { from: '2026-01-01', to: '2026-12-31' });
            expect(holidays.map((h) => [h.id, h.date])).toEqual(expected);
            expect(holidays.find((h) => h.id === 32)).toMatchObject({
              createdAt: SEEDED_AT, updatedAt: SEEDED_AT, branchesDetail: [expect.objectContaining({ createdAt: SEEDED_AT, updatedAt: SEEDED_AT })],
            });
            expect((await getBusinessHours(pool, 101))[0].schedules.slice(2)).toEqual(edgeSchedules);
          } finally {
            await pool.end();
          }
          const http = (await get('/api/v1/holidays/?from=2026-01-01&to=2026-12-31')).json();
          expect(http.map((h: any) => [h.id, h.date])).toEqual(expected);
          expect((await get('/api/v1/business-hours/')).json()[0].schedules.slice(2)).toEqual(edgeSchedules);
        }
      } finally {
        restore('TZ');
        restore('PGOPTIONS');
      }
    });
  });

  describe('tenant isolation', () => {
    it('companies sharing branch, schedule and holiday ids never see each other, cached or not', async () => {
      const ids = async (key: string) => ({
        info: (await get('/api/v1/business-info/', key)).json().id,
        hours: (await get('/api/v1/business-hours/', key)).json().map((b: any) => b.branchName),
        holidays: (await get('/api/v1/holidays/', key)).json().map((h: any) => [h.company, ...h.branchesDetail.map((b: any) => b.company)]),
        numbers: (await get('/api/v1/business-accounts/', key)).json().phoneNumbers.map((n: any) => n.id),
      });
      for (let i = 0; i < 3; i++) {
        const [a, b] = await Promise.all([ids(EXAMPLE.key), ids(SECOND.key)]);
        expect(a.info).toBe(101);
        expect(a.hours).toEqual(['Sede Centro', 'Online']);
        expect(a.holidays.flat().every((c: number) => c === 101)).toBe(true);
        expect(a.numbers).toEqual([21]);
        expect(b).toEqual({ info: 202, hours: ['Local Avellaneda'], holidays: [[202]], numbers: [41] });
      }
    });
  });
});
