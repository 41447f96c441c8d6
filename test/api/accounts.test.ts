import { seedFixture } from '../../src/commands/provisioning/seed';
import { recordQuotaUse } from '../../src/projections/accounts/projection';
import { withTransaction } from '../../src/shared/tx';
import { createTestApp } from '../support/services';
import { EXAMPLE, SECOND, twoCompanyFixture } from '../support/provisioning';

// GET /api/v1/business-accounts/ against the seeded example fixture (+ a second company).

const NOW = new Date('2026-03-01T10:00:00.000Z');
const hoursAgo = (h: number) => new Date(NOW.getTime() - h * 3600_000);

const appointmentReminder = {
  name: 'appointment_reminder',
  language: 'es',
  category: 'UTILITY',
  variables: [
    { name: 'patient_name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
    { name: 'appointment_at', type: 'DATE_TIME', position: 2, isRequired: true, component: 'BODY' },
    { name: 'booking_code', type: 'TEXT', position: 1, isRequired: false, component: 'BUTTON' },
  ],
  buttons: [{ type: 'URL', text: 'Ver turno', url: 'https://clinicanorte.example/t/{{1}}' }],
};

const number21 = (quota: object, templates: object[] = [appointmentReminder]) => ({
  id: 21,
  phoneNumberId: '109876543210001',
  displayPhoneNumber: '+54 9 11 4321-0000',
  verifiedName: 'Clinica Norte',
  businessName: 'Clinica Norte SA',
  isPrimary: true,
  messagingLimitTier: 'TIER_250',
  quota,
  templates,
});

describe('GET /api/v1/business-accounts/', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => NOW });
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (key?: string) =>
    t.app.inject({ method: 'GET', url: '/api/v1/business-accounts/', headers: key === undefined ? {} : { 'x-api-key': key } });

  /** What a send feature records through the accounts projection. */
  const sent = (numberId: number, recipient: string, at: Date) =>
    withTransaction(t.services.pool, async (tx) => {
      await tx.query('SET LOCAL search_path TO rm_accounts, public');
      await recordQuotaUse(tx, { numberId, recipient, at });
    });

  it('returns company, key name, numbers with quota and only APPROVED templates', async () => {
    const res = await get(EXAMPLE.key);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      companyName: 'Clinica Norte',
      apiKeyName: 'CRM sync',
      phoneNumbers: [number21({ dailyLimit: 250, uniqueNumbersSent24h: 0, remaining: 250, usagePercentage: 0, canSend: true })],
    });
  });

  it('is scoped to the company of the key; TIER_UNLIMITED reports 2^53 - 1 as its limit', async () => {
    const res = await get(SECOND.key);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      companyName: 'Ferreteria Sur',
      apiKeyName: 'Shop sync',
      phoneNumbers: [
        {
          id: 41,
          phoneNumberId: '109876543210002',
          displayPhoneNumber: '+54 9 11 4999-0000',
          verifiedName: 'Ferreteria Sur',
          businessName: 'Ferreteria Sur SRL',
          isPrimary: true,
          messagingLimitTier: 'TIER_UNLIMITED',
          quota: { dailyLimit: 9007199254740991, uniqueNumbersSent24h: 0, remaining: 9007199254740991, usagePercentage: 0, canSend: true },
          templates: [
            { name: 'stock_alert', language: 'es', category: 'MARKETING', variables: [{ name: 'product', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' }], buttons: [] },
          ],
        },
      ],
    });
  });

  it('counts unique recipients of the rolling 24 h window', async () => {
    await sent(21, '+5491100000001', hoursAgo(1));
    await sent(21, '+5491100000001', hoursAgo(2)); // same recipient: counted once, latest time kept
    await sent(21, '+5491100000002', hoursAgo(23.9));
    await sent(21, '+5491100000003', hoursAgo(24.1)); // out of the window
    await sent(41, '+5491100000004', hoursAgo(1)); // another company's number
    const res = await get(EXAMPLE.key);
    expect(res.json().phoneNumbers[0].quota).toEqual({ dailyLimit: 250, uniqueNumbersSent24h: 2, remaining: 248, usagePercentage: 0.8, canSend: true });
    // recording the same use twice changes nothing (projection idempotency)
    await sent(21, '+5491100000002', hoursAgo(23.9));
    expect((await get(EXAMPLE.key)).json().phoneNumbers[0].quota.uniqueNumbersSent24h).toBe(2);
  });

  it('reports an exhausted quota: remaining 0, 100 %, canSend false', async () => {
    for (let i = 0; i < 250; i++) await sent(21, `+54911200${String(i).padStart(5, '0')}`, hoursAgo(3));
    const quota = (await get(EXAMPLE.key)).json().phoneNumbers[0].quota;
    expect(quota).toEqual({ dailyLimit: 250, uniqueNumbersSent24h: 252, remaining: 0, usagePercentage: 100, canSend: false });
  });

  it('401 without a key, with an unknown key, with an expired key', async () => {
    expect((await get()).statusCode).toBe(401);
    expect((await get()).json()).toEqual({ error: 'API key required: send it in the X-API-Key header' });
    expect((await get('sbk_unknown000000000000000000000')).json()).toEqual({ error: 'invalid API key' });
    const expired = await get(EXAMPLE.expiredKey);
    expect(expired.statusCode).toBe(401);
    expect(expired.json()).toEqual({ error: 'API key expired' });
  });

  it('403 with a global key', async () => {
    const res = await get(EXAMPLE.globalKey);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: 'this API key has no access to company resources' });
  });

  it('wrong method: 405 with Allow and the plain error body (404 until 2026-11-28)', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/business-accounts/', headers: { 'x-api-key': EXAMPLE.key } });
    expect({ status: res.statusCode, allow: res.headers.allow, body: res.json() }).toEqual({
      status: 405, allow: 'GET, HEAD', body: { error: 'POST is not allowed on /api/v1/business-accounts/: it takes GET, HEAD' },
    });
  });

  it('401 with a revoked key, from the next request on', async () => {
    const doc = twoCompanyFixture();
    doc.companies[0].apiKeys[0].active = false;
    expect((await get(EXAMPLE.key)).statusCode).toBe(200);
    await seedFixture(t.services, doc, { actor: 'test' });
    const res = await get(EXAMPLE.key);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'API key revoked' });
    expect((await get(SECOND.key)).statusCode).toBe(200);
  });
});
