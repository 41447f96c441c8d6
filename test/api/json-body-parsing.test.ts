import { seedFixture } from '../../src/commands/provisioning/seed';
import { signWebhook } from '../../src/shared/provider-webhook';
import { createTestApp } from '../support/services';
import { APP_SECRET, SHOP, sendsFixture, statusBody } from '../support/sends';

// Regression hunt (2026-11-27, helper B): the JSON parser replaced by acceptEmptyJsonBodies and the nesting-depth
// check in preValidation. Bodies fastify's default parser refused stay refused as 4xx, in the route's shape; the
// provider webhook route keeps its raw bytes (signature) and is not judged by the depth check.

const NOW = new Date('2026-03-01T10:00:00.000Z');
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('JSON bodies after the parser change', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => NOW });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(() => t?.close());

  const post = (url: string, payload: string, contentType = 'application/json') =>
    t.app.inject({ method: 'POST', url, payload, headers: { 'x-api-key': SHOP.key, 'content-type': contentType } });

  it.each([
    ['only whitespace', '  \n\t '],
    ['null', 'null'],
    ['constructor.prototype poisoning', '{"url":"https://hooks.example/in","event_types":["message.sent"],"constructor":{"prototype":{"x":1}}}'],
    ['__proto__ nested', '{"url":"https://hooks.example/in","event_types":["message.sent"],"a":{"__proto__":{"x":1}}}'],
    ['a bare string', '"x"'],
  ])('%s: a 4xx {error} on a plain route, nothing registered', async (_what, payload) => {
    const res = await post('/api/v1/webhook-endpoints/', payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: expect.any(String) });
    expect(Object.prototype).not.toHaveProperty('x');
  });

  it('a charset parameter still goes through the JSON parser', async () => {
    const res = await post('/api/v1/webhook-endpoints/', '{"url":"https://hooks.example/cs","event_types":["message.sent"]}', 'application/json; charset=utf-8');
    expect(res.statusCode).toBe(201);
  });

  it('the provider webhook route verifies the raw bytes (spacing, escapes) and is not refused for nesting', async () => {
    const body = statusBody(SHOP.number.phoneNumberId, 'wamid.REGRESS-B', 'delivered', '2026-03-01T09:59:00.000Z');
    const raw = JSON.stringify(body, null, 3).replace('"entry"', '"\\u0065ntry"').replace(/}$/, `, "extra": ${nested(100)} }`);
    const res = await t.app.inject({
      method: 'POST', url: '/webhooks/provider', payload: raw,
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) },
    });
    expect(res.statusCode).toBe(200);
    const empty = await t.app.inject({ method: 'POST', url: '/webhooks/provider', payload: '', headers: { 'content-type': 'application/json' } });
    expect(empty.statusCode).toBe(401);
  });
});
