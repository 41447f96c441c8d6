import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { EXAMPLE, SECOND, twoCompanyFixture } from '../support/provisioning';

// GET /api/v1/business-info/, /business-hours/, /holidays/ against the seeded example fixture (+ a second company).

const SEEDED_AT = '2026-03-01T10:00:00.000Z';

describe('business endpoints', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let clock = new Date(SEEDED_AT);

  beforeAll(async () => {
    t = await createTestApp({ now: () => clock });
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (url: string, key?: string) =>
    t.app.inject({ method: 'GET', url, headers: key === undefined ? {} : { 'x-api-key': key } });

  describe('GET /api/v1/business-info/', () => {
    it('returns the profile of the key company', async () => {
      const res = await get('/api/v1/business-info/', EXAMPLE.key);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json()).toEqual({
        id: 101,
        name: 'Clinica Norte',
        email: 'hola@clinicanorte.example',
        phone: '+541143210000',
        website: 'https://clinicanorte.example',
        address: 'Av. Cabildo 1234, CABA',
        description: 'Outpatient clinic',
        timezone: 'America/Argentina/Buenos_Aires',
        companySize: 'SMALL',
        companySizeDisplay: '11-50 employees',
        companyTypes: ['CLINIC'],
        categories: ['Health', 'Dentistry'],
      });
    });

    it('is scoped to the company of the key', async () => {
      const res = await get('/api/v1/business-info/', SECOND.key);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        id: 202,
        name: 'Ferreteria Sur',
        email: 'ventas@ferreteriasur.example',
        phone: '+541149990000',
        website: 'https://ferreteriasur.example',
        address: 'Av. Mitre 500, Avellaneda',
        description: 'Hardware store',
        timezone: 'America/Argentina/Buenos_Aires',
        companySize: 'MICRO',
        companySizeDisplay: '1-10 employees',
        companyTypes: ['ECOMMERCE'],
        categories: ['Hardware'],
      });
    });
  });

  describe('GET /api/v1/business-hours/', () => {
    it('returns the branches with their schedules', async () => {
      const res = await get('/api/v1/business-hours/', EXAMPLE.key);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual([
        {
          branchId: 1,
          branchName: 'Sede Centro',
          branchType: 'PHYSICAL',
          address: 'Florida 100, CABA',
          schedules: [
            {
              id: 1, days: ['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY'], daysDisplay: 'Monday to Friday',
              startTime: '09:00:00', finishAt: '18:00:00', isActive: true, description: 'Weekdays', specificDate: null,
            },
            {
              id: 2, days: [], daysDisplay: '2026-12-05', startTime: '10:00:00', finishAt: '14:00:00', isActive: true,
              description: 'Open day', specificDate: '2026-12-05',
            },
          ],
        },
        { branchId: 2, branchName: 'Online', branchType: 'ONLINE', address: '', schedules: [] },
      ]);
    });

    it('shows only the branches of the key company', async () => {
      const res = await get('/api/v1/business-hours/', SECOND.key);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual([
        {
          branchId: 1,
          branchName: 'Local Avellaneda',
          branchType: 'PHYSICAL',
          address: 'Av. Mitre 500',
          schedules: [
            { id: 1, days: ['SATURDAY', 'SUNDAY'], daysDisplay: 'Saturday, Sunday', startTime: '09:00:00', finishAt: '13:00:00', isActive: true, description: 'Weekend', specificDate: null },
          ],
        },
      ]);
    });
  });

  describe('GET /api/v1/holidays/', () => {
    const sedeCentro = {
      id: 1, company: 101, name: 'Sede Centro', address: 'Florida 100, CABA', phone: '+541143210001', branchType: 'PHYSICAL',
      createdAt: SEEDED_AT, updatedAt: SEEDED_AT,
    };
    const nochebuena = {
      id: 32, company: 101, name: 'Nochebuena', description: 'Reduced hours', date: '2026-12-24', branches: [1],
      branchesDetail: [sedeCentro], attentionTarget: 'BRANCH', hasCustomHours: true, startTime: '09:00:00', finishAt: '13:00:00',
      isActive: true, createdAt: SEEDED_AT, updatedAt: SEEDED_AT,
    };
    const navidad = {
      id: 31, company: 101, name: 'Navidad', description: 'Closed', date: '2026-12-25', branches: [], branchesDetail: [],
      attentionTarget: 'ALL', hasCustomHours: false, startTime: null, finishAt: null, isActive: true, createdAt: SEEDED_AT, updatedAt: SEEDED_AT,
    };

    it('returns the holidays ordered by date', async () => {
      const res = await get('/api/v1/holidays/', EXAMPLE.key);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual([nochebuena, navidad]);
    });

    it('filters by from and to, both inclusive', async () => {
      expect((await get('/api/v1/holidays/?from=2026-12-25', EXAMPLE.key)).json()).toEqual([navidad]);
      expect((await get('/api/v1/holidays/?to=2026-12-24', EXAMPLE.key)).json()).toEqual([nochebuena]);
      expect((await get('/api/v1/holidays/?from=2026-12-24&to=2026-12-24', EXAMPLE.key)).json()).toEqual([nochebuena]);
      expect((await get('/api/v1/holidays/?from=2026-12-24&to=2026-12-25', EXAMPLE.key)).json()).toEqual([nochebuena, navidad]);
      const empty = await get('/api/v1/holidays/?from=2027-01-01', EXAMPLE.key);
      expect(empty.statusCode).toBe(200);
      expect(empty.json()).toEqual([]);
      // a reversed range is empty, not an error (the spec's only 400 is the date format)
      expect((await get('/api/v1/holidays/?from=2026-12-25&to=2026-12-24', EXAMPLE.key)).json()).toEqual([]);
    });

    it.each([
      ['from=24-12-2026', 'from'],
      ['to=2026-13-01', 'to'],
      ['from=2026-02-30', 'from'],
      ['from=2026-12-24T00:00:00Z', 'from'],
      ['to=', 'to'],
    ])('400 when %s is not YYYY-MM-DD', async (query, field) => {
      const res = await get(`/api/v1/holidays/?${query}`, EXAMPLE.key);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: `${field}: must be a date YYYY-MM-DD` });
    });

    it('never shows another company holidays, even with the same holiday id', async () => {
      const res = await get('/api/v1/holidays/', SECOND.key);
      expect(res.json()).toEqual([
        {
          id: 31, company: 202, name: 'Dia del Trabajador', description: 'Closed', date: '2026-05-01', branches: [], branchesDetail: [],
          attentionTarget: 'ALL', hasCustomHours: false, startTime: null, finishAt: null, isActive: true, createdAt: SEEDED_AT, updatedAt: SEEDED_AT,
        },
      ]);
    });
  });

  describe('authentication', () => {
    const urls = ['/api/v1/business-info/', '/api/v1/business-hours/', '/api/v1/holidays/'];

    it.each(urls)('%s: 401 without a key', async (url) => {
      const res = await get(url);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'API key required: send it in the X-API-Key header' });
    });

    it.each(urls)('%s: 401 with an unknown key', async (url) => {
      const res = await get(url, 'sbk_doesnotexist00000000000000000');
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'invalid API key' });
    });

    it.each(urls)('%s: 401 with an expired key', async (url) => {
      const res = await get(url, EXAMPLE.expiredKey);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'API key expired' });
    });

    it.each(urls)('%s: 403 with a global key', async (url) => {
      const res = await get(url, EXAMPLE.globalKey);
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ error: 'this API key has no access to company resources' });
    });

    it('401 comes before query validation', async () => {
      const res = await get('/api/v1/holidays/?from=nope');
      expect(res.statusCode).toBe(401);
    });

    it('401 with a revoked key', async () => {
      const doc = twoCompanyFixture();
      doc.companies[1].apiKeys[0].active = false;
      await seedFixture(t.services, doc, { actor: 'test' });
      for (const url of urls) {
        const res = await get(url, SECOND.key);
        expect(res.statusCode).toBe(401);
        expect(res.json()).toEqual({ error: 'API key revoked' });
      }
    });
  });
});
