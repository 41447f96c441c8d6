import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { SHOP, sendsFixture } from '../support/sends';

// `Content-Type: application/json` with an empty body (what `curl -X POST -H 'Content-Type: application/json' URL`
// sends) is a request without a body: a route that takes none serves it; one that needs a body answers its own 400.

const NOW = new Date('2026-03-01T10:00:00.000Z');

describe('an empty body sent as application/json', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => NOW, env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(() => t?.close());

  const post = (url: string, payload: string, contentType?: string) =>
    t.app.inject({ method: 'POST', url, payload, headers: { 'x-api-key': SHOP.key, ...(contentType ? { 'content-type': contentType } : {}) } });

  it('a route that takes no body (rotate-secret) answers as it does without the header', async () => {
    const created = await t.app.inject({
      method: 'POST', url: '/api/v1/webhook-endpoints/', headers: { 'x-api-key': SHOP.key },
      payload: { url: 'https://hooks.example/in', event_types: ['message.sent'] },
    });
    expect(created.statusCode).toBe(201);
    const { id, secret } = created.json();

    const withHeader = await post(`/api/v1/webhook-endpoints/${id}/rotate-secret/`, '', 'application/json');
    expect(withHeader.statusCode).toBe(200);
    expect(withHeader.json().secret).toMatch(/^whsec_/);
    expect(withHeader.json().secret).not.toBe(secret);
    const without = await post(`/api/v1/webhook-endpoints/${id}/rotate-secret/`, '');
    expect(without.statusCode).toBe(200);
  });

  it('a route that needs a body answers its own 400, as without the header', async () => {
    const withHeader = await post('/api/v1/platform-templates/send/', '', 'application/json');
    const without = await post('/api/v1/platform-templates/send/', '');
    expect(withHeader.statusCode).toBe(400);
    expect(withHeader.json()).toEqual({ body: ['Invalid input: expected object, received null'] }); // the send's field-error shape
    expect(withHeader.json()).toEqual(without.json());
  });

  it('a body that is not JSON is still 400 {error}, and a JSON body with __proto__ is refused', async () => {
    const bad = await post('/api/v1/platform-templates/send/', '{', 'application/json');
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: expect.any(String) });
    const poisoned = await post('/api/v1/platform-templates/send/', '{"__proto__":{"x":1}}', 'application/json');
    expect(poisoned.statusCode).toBe(400);
    expect(poisoned.json()).toEqual({ error: expect.any(String) });
  });
});
