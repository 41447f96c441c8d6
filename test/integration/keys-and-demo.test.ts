import { DomainError } from '../../src/commands/decider';
import { seedDemo } from '../../src/commands/provisioning/demo';
import { blackFridayOf, DEMO_COMPANY_ID } from '../../src/commands/provisioning/demo-fixture';
import { generateApiKey, issueApiKey, listKeys, revokeApiKey } from '../../src/commands/provisioning/keys';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { seedDemoOnFreshStart } from '../../src/cli/demo';
import type { Runtime } from '../../src/main';
import { getCustomFields } from '../../src/projections/business/queries';
import { scopeOfKey } from '../../src/shared/api-key';
import { createTestApp } from '../support/services';
import { countEvents, EXAMPLE, exampleFixture } from '../support/provisioning';

describe('API keys and the demo', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (url: string, key: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': key } });

  describe('the demo seeded on a fresh start', () => {
    const runtime = (): Runtime => ({
      services: { ...t.services, config: { ...t.services.config, databaseUrl: undefined } },
      url: 'http://127.0.0.1:8080',
      beginStop: async () => undefined,
      stop: async () => undefined,
    });

    it('seeds the demo once, on an event store without companies, and prints its key', async () => {
      const out: string[] = [];
      const write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: any) => { out.push(String(chunk)); return true; });
      try {
        await seedDemoOnFreshStart(runtime());
        const text = out.join('');
        const key = /\n {2}(sbk_[0-9a-f]{64})\n/.exec(text)?.[1];
        expect(key).toBeDefined();
        expect(text).toContain(`curl -s -H 'X-API-Key: ${key}' http://127.0.0.1:8080/api/v1/business-accounts/`);
        expect((await get('/api/v1/business-info/', key!)).json()).toMatchObject({ id: DEMO_COMPANY_ID, name: 'Demo Store' });

        out.length = 0;
        const before = await countEvents(t.db.pool);
        await seedDemoOnFreshStart(runtime());
        expect(out).toEqual([]);
        expect(await countEvents(t.db.pool)).toBe(before);
      } finally {
        write.mockRestore();
      }
    });

    it('never seeds against DATABASE_URL', async () => {
      const r = { ...runtime(), services: t.services }; // the test services use DATABASE_URL
      const before = await countEvents(t.db.pool);
      await seedDemoOnFreshStart(r);
      expect(await countEvents(t.db.pool)).toBe(before);
    });
  });

  describe('switchboard demo', () => {
    it('shows every variable type, every button type and every custom-field type; a rerun adds only its new key', async () => {
      const demo = await seedDemo(t.services, { actor: 'test' });
      expect(scopeOfKey('sbk', demo.key)).toBe('company');
      // company, numbers and contacts already there (fresh start above): only the new key
      expect(demo.summary).toMatchObject({ appended: 1, unchanged: 3, contacts: { created: 0, changed: 0, unchanged: 3 } });

      const res = await get('/api/v1/business-accounts/', demo.key);
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body.companyName).toBe('Demo Store');
      expect(body.phoneNumbers.map((n: any) => [n.id, n.isPrimary, n.messagingLimitTier])).toEqual([[990301, true, 'TIER_1000'], [990302, false, 'TIER_250']]);
      const templates = body.phoneNumbers.flatMap((n: any) => n.templates);
      expect(templates.map((x: any) => x.name)).toEqual(['invoice_ready', 'order_confirmation', 'spring_collection', 'pickup_ready']);
      expect(new Set(templates.flatMap((x: any) => x.variables.map((v: any) => v.type)))).toEqual(new Set(['TEXT', 'CURRENCY', 'DATE_TIME', 'IMAGE', 'VIDEO', 'DOCUMENT']));
      expect(new Set(templates.flatMap((x: any) => x.buttons.map((b: any) => b.type)))).toEqual(new Set(['URL', 'QUICK_REPLY', 'PHONE_NUMBER', 'COPY_CODE']));
      const fields = await getCustomFields(t.db.pool, 990101);
      expect(new Set(fields.map((f) => f.fieldType))).toEqual(new Set(['string', 'text', 'textarea', 'int', 'float', 'email', 'url', 'date', 'datetime', 'time', 'selector', 'multiselector']));
      const hours = (await get('/api/v1/business-hours/', demo.key)).json();
      expect(hours.map((b: any) => b.schedules.map((s: any) => s.daysDisplay))).toEqual([
        ['Monday to Friday', 'Saturday', blackFridayOf(new Date().getUTCFullYear())], ['Monday, Wednesday, Friday', 'Sunday'], ['Every day'],
      ]);
    });
  });

  describe('switchboard keys', () => {
    beforeAll(async () => {
      await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    });

    it('generates keys of both forms with 256 random bits', () => {
      const a = generateApiKey('sbk', 'company');
      expect(a).toMatch(/^sbk_[0-9a-f]{64}$/);
      expect(generateApiKey('sbk', 'company')).not.toBe(a);
      expect(generateApiKey('sbk', 'global')).toMatch(/^sbk_global_[0-9a-f]{64}$/);
    });

    it('issue: the clear key works at once, is never stored, and list shows only ids, names and status', async () => {
      const issued = await issueApiKey(t.services, { scope: 'company', companyId: 101, name: 'Reporting', userId: 7 }, { actor: 'test' });
      const res = await get('/api/v1/business-accounts/', issued.key);
      expect(res.statusCode).toBe(200);
      expect(res.json().apiKeyName).toBe('Reporting');

      const stored = await t.db.pool.query(`SELECT data::text AS d FROM es.events WHERE stream_id = $1`, [`apikey-${issued.keyId}`]);
      expect(stored.rows[0].d).not.toContain(issued.key);

      const listed = await listKeys(t.services, 101);
      expect(JSON.stringify(listed)).not.toContain(issued.key);
      expect(listed.map((k) => [k.name, k.status])).toEqual([['CRM sync', 'active'], ['Old key', 'expired'], ['Reporting', 'active']]);
      expect(Object.keys(listed[0]).sort()).toEqual(['companyId', 'expiresAt', 'issuedAt', 'keyId', 'name', 'scope', 'status', 'userId']);
    });

    it('revoke: 401 from the next request on; revoking again reports it', async () => {
      const issued = await issueApiKey(t.services, { scope: 'company', companyId: 101, name: 'Temp', expiresAt: '2099-01-01T00:00:00Z' }, { actor: 'test' });
      expect((await get('/api/v1/business-info/', issued.key)).statusCode).toBe(200);
      expect(await revokeApiKey(t.services, issued.keyId, { actor: 'test', reason: 'test' })).toBe(true);
      const res = await get('/api/v1/business-info/', issued.key);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'API key revoked' });
      expect(await revokeApiKey(t.services, issued.keyId, { actor: 'test' })).toBe(false);
      expect((await listKeys(t.services, 101)).find((k) => k.keyId === issued.keyId)).toMatchObject({ status: 'revoked', expiresAt: '2099-01-01T00:00:00.000Z' });
    });

    it('a global key gets 403 on the company endpoints', async () => {
      const issued = await issueApiKey(t.services, { scope: 'global', name: 'BI export' }, { actor: 'test' });
      expect(issued.key).toMatch(/^sbk_global_/);
      const res = await get('/api/v1/business-accounts/', issued.key);
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ error: 'this API key has no access to company resources' });
      expect((await listKeys(t.services)).filter((k) => k.scope === 'global').map((k) => k.name).sort()).toEqual(['BI export', 'analytics']);
    });

    it.each<[string, Parameters<typeof issueApiKey>[1], string]>([
      ['unknown company', { scope: 'company', companyId: 999, name: 'x' }, 'no company 999'],
      ['unknown user', { scope: 'company', companyId: 101, name: 'x', userId: 8 }, 'company 101 has no user 8'],
      ['no company', { scope: 'company', name: 'x' }, 'a company key needs --company'],
      ['global with a company', { scope: 'global', companyId: 101, name: 'x' }, 'a global key has no company and no user'],
      ['expiry in the past', { scope: 'company', companyId: 101, name: 'x', expiresAt: '2020-01-01T00:00:00Z' }, '--expires 2020-01-01T00:00:00Z is not in the future'],
      ['bad expiry', { scope: 'company', companyId: 101, name: 'x', expiresAt: 'tomorrow' }, '--expires must be an ISO 8601 date-time, got "tomorrow"'],
      ['blank name', { scope: 'company', companyId: 101, name: '  ' }, 'a key needs a name'],
    ])('issue refuses: %s', async (_n, input, message) => {
      const before = await countEvents(t.db.pool);
      await expect(issueApiKey(t.services, input, { actor: 'test' })).rejects.toThrow(new DomainError('X', message));
      expect(await countEvents(t.db.pool)).toBe(before);
    });

    it('revoke refuses an unknown key id', async () => {
      await expect(revokeApiKey(t.services, 'key_nope', { actor: 'test' })).rejects.toThrow('no API key key_nope');
    });

    it('the seeded example keys are listed by name, never shown', async () => {
      const all = await listKeys(t.services);
      expect(JSON.stringify(all)).not.toContain(EXAMPLE.key);
      expect(JSON.stringify(all)).not.toContain(EXAMPLE.globalKey);
    });
  });
});
