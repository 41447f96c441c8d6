import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { EXAMPLE, SECOND, twoCompanyFixture } from '../support/provisioning';

// Review of the per-API-key rate limits (docs/rate-limits.md) on the real app and Postgres: a default of 2 requests
// per minute, fixed one-minute windows on an injected clock. Every request of an authenticated key counts and is
// refused over the limit whatever else is wrong with it: its body, its characters, the route's own key policy.

const MINUTE = 60_000;
let clock = Date.parse('2026-03-01T10:00:10.000Z');

const ACCOUNTS = '/api/v1/business-accounts/';
const UPSERT = '/api/v1/external/contacts/upsert/';
const SEND = '/api/v1/platform-templates/send/';

describe('per-API-key rate limits: what counts and is refused (review)', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(clock), env: { RATE_LIMIT_PER_MINUTE: '2' } });
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The clock `seconds` into a minute no earlier test used. */
  const freshMinute = (seconds: number) => {
    clock = (Math.floor(clock / MINUTE) + 1) * MINUTE + seconds * 1000;
  };
  const call = (key: string, method: 'GET' | 'POST', url: string, body?: string) =>
    t.app.inject({ method, url, headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, payload: body });
  const answer = (res: Awaited<ReturnType<typeof call>>) => ({ status: res.statusCode, body: res.json(), retryAfter: res.headers['retry-after'] });
  const limited = (seconds: number) => ({
    status: 429, body: { error: `rate limit exceeded: at most 2 requests per minute per API key; retry in ${seconds} seconds` }, retryAfter: String(seconds),
  });

  it('a limited key is refused before its body is read: malformed JSON or a NUL is 429, not 400', async () => {
    freshMinute(20);
    for (let i = 0; i < 2; i++) expect((await call(EXAMPLE.key, 'GET', ACCOUNTS)).statusCode).toBe(200);
    expect(answer(await call(EXAMPLE.key, 'POST', UPSERT, '{"phone": '))).toEqual(limited(40));
    expect(answer(await call(EXAMPLE.key, 'POST', SEND, '{"phone_number_id": '))).toEqual(limited(40));
    expect(answer(await call(EXAMPLE.key, 'POST', UPSERT, JSON.stringify({ phone: '+5491155550000', full_name: 'a\u0000b' })))).toEqual(limited(40));
    expect(answer(await call(EXAMPLE.key, 'GET', `${ACCOUNTS}?x=%00`))).toEqual(limited(40));
  });

  it('a request whose body is not valid JSON counts against its key, as every 400 does', async () => {
    freshMinute(0);
    expect(answer(await call(SECOND.key, 'POST', UPSERT, '{"phone": '))).toEqual({ status: 400, body: { error: 'request body is not valid JSON' }, retryAfter: undefined });
    expect((await call(SECOND.key, 'GET', ACCOUNTS)).statusCode).toBe(200);
    expect(answer(await call(SECOND.key, 'GET', ACCOUNTS))).toEqual(limited(60));
  });

  it("a global key's requests refused 403 by a company route's own policy count too", async () => {
    freshMinute(30);
    for (let i = 0; i < 2; i++) {
      expect(answer(await call(EXAMPLE.globalKey, 'GET', ACCOUNTS)))
        .toEqual({ status: 403, body: { error: 'this API key has no access to company resources' }, retryAfter: undefined });
    }
    expect(answer(await call(EXAMPLE.globalKey, 'GET', ACCOUNTS))).toEqual(limited(30));
    expect(answer(await call(EXAMPLE.globalKey, 'GET', '/api/v1/business-info/'))).toEqual(limited(30));
  });
});
