// Review of API-key authentication (third pass), over real HTTP: every API route refuses a request without a valid
// key with 401 in its route's error shape, before looking at its parameters or body; malformed X-API-Key headers;
// a key of company A on company B's resources; the ops endpoints.
import { connect } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { revokeApiKey } from '../../src/commands/provisioning/keys';
import { hashApiKey, keyIdFromHash } from '../../src/shared/api-key';
import { EXAMPLE, SECOND, twoCompanyFixture } from '../support/provisioning';
import { createTestApp, TEST_PEPPER } from '../support/services';

type T = Awaited<ReturnType<typeof createTestApp>>;

/** Every API route, with parameters and a body that are all invalid (so a 400 would show validation ran first). */
const ROUTES: Array<{ method: 'GET' | 'POST' | 'PATCH' | 'DELETE'; url: string; payload?: unknown; shape: 'plain' | 'export' }> = [
  { method: 'GET', url: '/api/v1/qualitative-export/messages?company_id=abc&from=x', shape: 'export' },
  { method: 'GET', url: '/api/v1/business-accounts/?x=1', shape: 'plain' },
  { method: 'GET', url: '/api/v1/business-info/', shape: 'plain' },
  { method: 'GET', url: '/api/v1/business-hours/', shape: 'plain' },
  { method: 'GET', url: '/api/v1/holidays/?from=not-a-date', shape: 'plain' },
  { method: 'GET', url: '/api/v1/contact-lookup/', shape: 'plain' },
  { method: 'GET', url: '/api/v1/external/contacts/', shape: 'plain' },
  { method: 'POST', url: '/api/v1/external/contacts/upsert/', payload: { nope: true }, shape: 'plain' },
  { method: 'POST', url: '/api/v1/platform-templates/send/', payload: {}, shape: 'plain' },
  { method: 'GET', url: '/api/v1/platform-templates/messages/x/', shape: 'plain' },
  { method: 'POST', url: '/api/v1/platform-templates/send-bulk/', payload: { recipients: 'none' }, shape: 'plain' },
  { method: 'GET', url: '/api/v1/platform-templates/bulk-sends/?page=zero', shape: 'plain' },
  { method: 'GET', url: '/api/v1/platform-templates/bulk-sends/not-a-uuid/', shape: 'plain' },
  { method: 'GET', url: '/api/v1/platform-templates/bulk-sends/not-a-uuid/messages/?page=-1', shape: 'plain' },
  { method: 'POST', url: '/api/v1/platform-templates/bulk-sends/not-a-uuid/cancel/', shape: 'plain' },
  { method: 'POST', url: '/api/v1/webhook-endpoints/', payload: { url: 42 }, shape: 'plain' },
  { method: 'GET', url: '/api/v1/webhook-endpoints/?limit=x', shape: 'plain' },
  { method: 'GET', url: '/api/v1/webhook-endpoints/x/', shape: 'plain' },
  { method: 'PATCH', url: '/api/v1/webhook-endpoints/x/', payload: { enabled: 'maybe' }, shape: 'plain' },
  { method: 'DELETE', url: '/api/v1/webhook-endpoints/x/', shape: 'plain' },
  { method: 'POST', url: '/api/v1/webhook-endpoints/x/rotate-secret/', shape: 'plain' },
  { method: 'GET', url: '/api/v1/webhook-endpoints/x/deliveries/?status=bogus', shape: 'plain' },
  { method: 'POST', url: '/api/v1/webhook-endpoints/x/deliveries/y/retry/', shape: 'plain' },
  { method: 'POST', url: '/api/v1/webhook-endpoints/x/recover/', payload: { since: 'x' }, shape: 'plain' },
  { method: 'POST', url: '/api/v1/webhook-endpoints/x/test/', payload: { event_type: 5 }, shape: 'plain' },
];

/** One raw HTTP/1.1 request (headers exactly as given, duplicates included): status and body. */
function rawRequest(port: number, lines: string[]): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    socket.on('data', (d) => (data += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('end', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1]);
      resolve({ status, body: data.slice(data.indexOf('\r\n\r\n') + 4) });
    });
    socket.write(`${[...lines, 'Host: localhost', 'Connection: close'].join('\r\n')}\r\n\r\n`);
  });
}

describe('API key authentication (review 3)', () => {
  let t: T;
  let port: number;
  const revokedKey = 'sbk_review3revoked000000000000000';

  beforeAll(async () => {
    t = await createTestApp();
    const doc = twoCompanyFixture();
    doc.companies[0].apiKeys.push({ name: 'to revoke', key: revokedKey, userId: null, active: true, expiresAt: null });
    await seedFixture(t.services, doc, { actor: 'test' });
    await revokeApiKey(t.services, keyIdFromHash(hashApiKey(TEST_PEPPER, revokedKey)), { actor: 'test' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  const call = (route: (typeof ROUTES)[number], headers: Record<string, string>) =>
    fetch(`http://127.0.0.1:${port}${route.url}`, {
      method: route.method,
      headers: { ...headers, ...(route.payload !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: route.payload !== undefined ? JSON.stringify(route.payload) : undefined,
    });

  const unauthorizedBody = (shape: 'plain' | 'export', message: string) =>
    shape === 'export' ? { error: { code: 'AUTH_REQUIRED', message } } : { error: message };

  it.each([
    ['no key', {}, 'API key required: send it in the X-API-Key header'],
    ['an empty key', { 'x-api-key': '' }, 'API key required: send it in the X-API-Key header'],
    ['a key of another form', { 'x-api-key': 'Bearer sbk_cn7f3a9d2e4b6c8a0f1e3d5c7b9a2468' }, 'invalid API key'],
    ['an unknown key', { 'x-api-key': 'sbk_unknown000000000000000000000000' }, 'invalid API key'],
    ['an expired key', { 'x-api-key': EXAMPLE.expiredKey }, 'API key expired'],
    ['a revoked key', { 'x-api-key': revokedKey }, 'API key revoked'],
  ])('every API route answers %s with 401 in its error shape, before validating the request', async (_what, headers, message) => {
    const answers = [];
    for (const route of ROUTES) {
      const res = await call(route, headers as Record<string, string>);
      answers.push({ route: `${route.method} ${route.url}`, status: res.status, body: await res.json() });
    }
    expect(answers).toEqual(ROUTES.map((route) => ({ route: `${route.method} ${route.url}`, status: 401, body: unauthorizedBody(route.shape, message) })));
  });

  it('refuses malformed X-API-Key headers with 401 {error}', async () => {
    const url = '/api/v1/business-info/';
    const cases: Array<[string[], string]> = [
      [[`X-API-Key: ${EXAMPLE.key}`, `X-API-Key: ${SECOND.key}`], 'invalid API key'], // two keys: not one of them
      [['X-API-Key:    '], 'API key required: send it in the X-API-Key header'],
      [[`X-API-Key: ${EXAMPLE.key}x`], 'invalid API key'],
      [[`X-API-Key: ${EXAMPLE.key.toUpperCase()}`], 'invalid API key'],
      [[`X-API-Key: sbk_${'a'.repeat(600)}`], 'invalid API key'],
      [[`X-API-Key: sbk_global_${'a'.repeat(4)}`], 'invalid API key'],
      [[`Authorization: Bearer ${EXAMPLE.key}`], 'API key required: send it in the X-API-Key header'],
      [[`X-API-Key: ${EXAMPLE.key.replace('sbk_', 'sbk_global_')}`], 'invalid API key'],
    ];
    for (const [headers, message] of cases) {
      const res = await rawRequest(port, [`GET ${url} HTTP/1.1`, ...headers]);
      expect({ headers, status: res.status, body: JSON.parse(res.body) }).toEqual({ headers, status: 401, body: { error: message } });
    }
    // a HEAD of a GET route is a route of the API too
    const head = await rawRequest(port, [`HEAD ${url} HTTP/1.1`]);
    expect(head.status).toBe(401);
    expect((await rawRequest(port, [`HEAD ${url} HTTP/1.1`, `X-API-Key: ${EXAMPLE.key}`])).status).toBe(200);
    // the key itself, once, surrounded by blanks (HTTP trims them): accepted
    const ok = await rawRequest(port, [`GET ${url} HTTP/1.1`, `X-API-Key:   ${EXAMPLE.key}  `]);
    expect(ok.status).toBe(200);
  });

  it("a key of company A gets 403 COMPANY_ACCESS_DENIED exporting company B, and only its own company's data elsewhere", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/qualitative-export/messages?company_id=${EXAMPLE.companyId},${SECOND.companyId}&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z`, {
      headers: { 'x-api-key': EXAMPLE.key },
    });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ error: { code: 'COMPANY_ACCESS_DENIED', message: `this API key has no access to company ${SECOND.companyId}` } });
    const info = await fetch(`http://127.0.0.1:${port}/api/v1/business-info/`, { headers: { 'x-api-key': SECOND.key } });
    expect(((await info.json()) as { name: string }).name).toBe('Ferreteria Sur');
  });

  it('a global key: export yes, company resources 403, contacts 401', async () => {
    const h = { 'x-api-key': EXAMPLE.globalKey };
    const exp = await fetch(`http://127.0.0.1:${port}/api/v1/qualitative-export/messages?company_id=${SECOND.companyId}&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z`, { headers: h });
    expect(exp.status).toBe(200);
    await exp.text();
    const info = await fetch(`http://127.0.0.1:${port}/api/v1/business-info/`, { headers: h });
    expect([info.status, await info.json()]).toEqual([403, { error: 'this API key has no access to company resources' }]);
    const upsert = await fetch(`http://127.0.0.1:${port}/api/v1/external/contacts/upsert/`, {
      method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body: JSON.stringify({ phone: '+5491100000000' }),
    });
    expect([upsert.status, await upsert.json()]).toEqual([401, { error: 'a company API key is required for this endpoint' }]);
  });

  it('the ops endpoints answer without a key and show no tenant data', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      const body = await res.text();
      for (const secret of [EXAMPLE.key, SECOND.key, 'Ferreteria', 'Clinica']) expect(body).not.toContain(secret);
    }
  });
});
