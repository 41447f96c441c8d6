import { setCompanyRateLimit } from '../../src/commands/provisioning/rate-limits';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { buildApp } from '../../src/http/app';
import { EXPORT_PATH } from '../../src/http/routes/export';
import { createTestApp } from '../support/services';
import { EXAMPLE, SECOND, twoCompanyFixture } from '../support/provisioning';

// Per-API-key rate limits (docs/rate-limits.md) on the real app and Postgres: a default of 3 requests per minute
// (RATE_LIMIT_PER_MINUTE), fixed one-minute windows on an injected clock.

const MINUTE = 60_000;
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
let clock = T0 + 10_000;

const ACCOUNTS = '/api/v1/business-accounts/';
const BULK_DETAIL = '/api/v1/platform-templates/bulk-sends/6f1c2b3a-0000-4000-8000-000000000000/';

describe('per-API-key rate limits', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(clock), env: { RATE_LIMIT_PER_MINUTE: '3' } });
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The clock `seconds` into a minute no earlier test used. */
  const freshMinute = (seconds: number) => {
    clock = (Math.floor(clock / MINUTE) + 1) * MINUTE + seconds * 1000;
  };
  const get = (key: string | undefined, url = ACCOUNTS) =>
    t.app.inject({ method: 'GET', url, headers: key === undefined ? {} : { 'x-api-key': key } });
  const limitHeaders = (res: { headers: Record<string, unknown> }) => ({
    limit: res.headers['ratelimit-limit'], remaining: res.headers['ratelimit-remaining'], reset: res.headers['ratelimit-reset'],
    retryAfter: res.headers['retry-after'],
  });

  it('answers with the key window once half of it is used, and 429 in the plain shape at the limit, while another company is unaffected', async () => {
    freshMinute(10);
    // 1 of 3 used: far from the limit, no RateLimit-* headers (the IETF draft's "Performance Considerations")
    const first = await get(EXAMPLE.key);
    expect(first.statusCode).toBe(200);
    expect(limitHeaders(first)).toEqual({ limit: undefined, remaining: undefined, reset: undefined, retryAfter: undefined });
    for (const remaining of ['1', '0']) {
      const ok = await get(EXAMPLE.key);
      expect(ok.statusCode).toBe(200);
      expect(limitHeaders(ok)).toEqual({ limit: '3', remaining, reset: '50', retryAfter: undefined });
    }
    const limited = await get(EXAMPLE.key);
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toEqual({ error: 'rate limit exceeded: at most 3 requests per minute per API key; retry in 50 seconds' });
    expect(limitHeaders(limited)).toEqual({ limit: '3', remaining: '0', reset: '50', retryAfter: '50' });

    const other = await get(SECOND.key);
    expect(other.statusCode).toBe(200);
    expect(other.json().companyName).toBe('Ferreteria Sur');
    expect(limitHeaders(other)).toEqual({ limit: undefined, remaining: undefined, reset: undefined, retryAfter: undefined });
    expect(limitHeaders(await get(SECOND.key))).toEqual({ limit: '3', remaining: '1', reset: '50', retryAfter: undefined });
  });

  it('limits every endpoint of the key, each in its own error shape, whether it authenticates on onRequest or preHandler', async () => {
    freshMinute(30);
    for (let i = 0; i < 3; i++) expect((await get(EXAMPLE.key)).statusCode).toBe(200);
    const exported = await get(EXAMPLE.key, `${EXPORT_PATH}?company_id=${EXAMPLE.companyId}`);
    expect(exported.statusCode).toBe(429);
    expect(exported.json()).toEqual({
      error: { code: 'RATE_LIMITED', message: 'rate limit exceeded: at most 3 requests per minute per API key; retry in 30 seconds' },
    });
    expect(exported.headers['retry-after']).toBe('30');

    const bulk = await get(EXAMPLE.key, BULK_DETAIL);
    expect(bulk.statusCode).toBe(429);
    expect(bulk.json()).toEqual({ error: 'rate limit exceeded: at most 3 requests per minute per API key; retry in 30 seconds' });
    expect(limitHeaders(bulk)).toEqual({ limit: '3', remaining: '0', reset: '30', retryAfter: '30' });

    // the other company's key reaches the same endpoint's own answer
    const otherBulk = await get(SECOND.key, BULK_DETAIL);
    expect(otherBulk.statusCode).toBe(404);
    expect(otherBulk.json()).toEqual({ detail: 'Bulk send not found.' });
    expect(limitHeaders(otherBulk)).toEqual({ limit: undefined, remaining: undefined, reset: undefined, retryAfter: undefined }); // its first of 3
    expect(limitHeaders(await get(SECOND.key, BULK_DETAIL))).toEqual({ limit: '3', remaining: '1', reset: '30', retryAfter: undefined });
  });

  it('counts a limited key\'s invalid requests too (refused with 429, not 400)', async () => {
    freshMinute(0);
    for (let i = 0; i < 3; i++) expect((await get(EXAMPLE.key, '/api/v1/contact-lookup/')).statusCode).toBe(400);
    const limited = await get(EXAMPLE.key, '/api/v1/contact-lookup/');
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toEqual({ error: 'rate limit exceeded: at most 3 requests per minute per API key; retry in 60 seconds' });
  });

  it('starts a new window each minute', async () => {
    freshMinute(59);
    for (let i = 0; i < 3; i++) expect((await get(EXAMPLE.key)).statusCode).toBe(200);
    expect((await get(EXAMPLE.key)).statusCode).toBe(429);
    clock += 1_000; // the next minute
    const next = await get(EXAMPLE.key);
    expect(next.statusCode).toBe(200);
    expect(limitHeaders(next)).toEqual({ limit: undefined, remaining: undefined, reset: undefined, retryAfter: undefined }); // the first of the new window
    expect(limitHeaders(await get(EXAMPLE.key))).toEqual({ limit: '3', remaining: '1', reset: '60', retryAfter: undefined });
  });

  it('does not count requests without an authenticated key: health, metrics, the webhook ingress, a rejected key', async () => {
    freshMinute(0);
    for (let i = 0; i < 5; i++) {
      const health = await get(undefined, '/healthz');
      expect(health.statusCode).toBe(200);
      expect(health.headers['ratelimit-limit']).toBeUndefined();
      const denied = await get('sbk_not_a_real_key_000000000000000');
      expect(denied.statusCode).toBe(401);
      expect(denied.json()).toEqual({ error: 'invalid API key' });
      expect(denied.headers['ratelimit-limit']).toBeUndefined();
    }
    const handshake = await get(undefined, '/webhooks/provider?hub.mode=subscribe&hub.verify_token=test-verify-token&hub.challenge=42');
    expect(handshake.statusCode).toBe(200);
    expect(handshake.headers['ratelimit-limit']).toBeUndefined();
    expect((await get(EXAMPLE.key)).statusCode).toBe(200);
    expect(limitHeaders(await get(EXAMPLE.key))).toEqual({ limit: '3', remaining: '1', reset: '60', retryAfter: undefined }); // none of the above counted
  });

  it('applies a company\'s own limit (set by the operator) to its keys and leaves the others at the default', async () => {
    expect(await setCompanyRateLimit(t.services, SECOND.companyId, 1, { actor: 'test' })).toBe(true);
    await t.app.rateLimitCounter!.refreshLimits();
    try {
      freshMinute(20);
      const first = await get(SECOND.key);
      expect(first.statusCode).toBe(200);
      expect(limitHeaders(first)).toEqual({ limit: '1', remaining: '0', reset: '40', retryAfter: undefined });
      const limited = await get(SECOND.key);
      expect(limited.statusCode).toBe(429);
      expect(limited.json()).toEqual({ error: 'rate limit exceeded: at most 1 request per minute per API key; retry in 40 seconds' });
      expect((await get(EXAMPLE.key)).statusCode).toBe(200);
      expect(limitHeaders(await get(EXAMPLE.key))).toEqual({ limit: '3', remaining: '1', reset: '40', retryAfter: undefined });
    } finally {
      expect(await setCompanyRateLimit(t.services, SECOND.companyId, null, { actor: 'test' })).toBe(true);
      await t.app.rateLimitCounter!.refreshLimits();
    }
    freshMinute(0);
    expect((await get(SECOND.key)).statusCode).toBe(200);
    expect(limitHeaders(await get(SECOND.key))).toEqual({ limit: '3', remaining: '1', reset: '60', retryAfter: undefined });
    expect(await setCompanyRateLimit(t.services, SECOND.companyId, null, { actor: 'test' })).toBe(false);
    await expect(setCompanyRateLimit(t.services, 999, 5, { actor: 'test' })).rejects.toMatchObject({ code: 'UNKNOWN_COMPANY', message: 'no company 999' });
  });

  it('adds the RateLimit-* headers once the key has used half of its window (limit 10: from the fifth answer), and to every 429', async () => {
    expect(await setCompanyRateLimit(t.services, SECOND.companyId, 10, { actor: 'test' })).toBe(true);
    await t.app.rateLimitCounter!.refreshLimits();
    try {
      freshMinute(15);
      const answers = [];
      for (let i = 0; i < 11; i++) answers.push(await get(SECOND.key));
      expect(answers.map((a) => a.statusCode)).toEqual([...Array(10).fill(200), 429]);
      expect(answers.slice(0, 4).map(limitHeaders)).toEqual(Array(4).fill({ limit: undefined, remaining: undefined, reset: undefined, retryAfter: undefined }));
      expect(answers.slice(4, 10).map((a) => limitHeaders(a).remaining)).toEqual(['5', '4', '3', '2', '1', '0']);
      expect(limitHeaders(answers[4])).toEqual({ limit: '10', remaining: '5', reset: '45', retryAfter: undefined });
      expect(limitHeaders(answers[10])).toEqual({ limit: '10', remaining: '0', reset: '45', retryAfter: '45' });
    } finally {
      expect(await setCompanyRateLimit(t.services, SECOND.companyId, null, { actor: 'test' })).toBe(true);
      await t.app.rateLimitCounter!.refreshLimits();
    }
  });

  it('shares the count between two app instances on the same database', async () => {
    const other = await buildApp(t.services);
    await other.ready();
    try {
      freshMinute(5);
      expect((await get(EXAMPLE.key)).statusCode).toBe(200);
      expect((await get(EXAMPLE.key)).statusCode).toBe(200);
      await t.app.rateLimitCounter!.sync();
      await other.rateLimitCounter!.sync(); // nothing of its own yet: it has not seen the key
      const third = await other.inject({ method: 'GET', url: ACCOUNTS, headers: { 'x-api-key': EXAMPLE.key } });
      expect(third.statusCode).toBe(200);
      await other.rateLimitCounter!.sync(); // adds its 1 and reads back 3
      const limited = await other.inject({ method: 'GET', url: ACCOUNTS, headers: { 'x-api-key': EXAMPLE.key } });
      expect(limited.statusCode).toBe(429);
      expect(limitHeaders(limited)).toEqual({ limit: '3', remaining: '0', reset: '55', retryAfter: '55' });
      await t.app.rateLimitCounter!.sync(); // reads back the other instance's 2
      expect((await get(EXAMPLE.key)).statusCode).toBe(429);
    } finally {
      await other.close();
    }
  });
});
