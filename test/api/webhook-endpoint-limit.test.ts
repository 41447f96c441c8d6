import { seedFixture } from '../../src/commands/provisioning/seed';
import { createWebhookEndpoint, webhookEndpointDepsOf } from '../../src/commands/webhook-endpoint/handler';
import { createTestApp } from '../support/services';
import { OTHER, SHOP, sendsFixture } from '../support/sends';

// A company has at most WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY endpoints (docs/webhooks.md, "Endpoints API"): every event
// is queued once per endpoint and the sender's fairness is per endpoint, so without a bound one company could take
// the sender from every other. Here the limit is 3.

const BASE = '/api/v1/webhook-endpoints/';
const LIMIT_MESSAGE = 'a company may have at most 3 webhook endpoints: delete one it no longer uses first';

describe('webhook endpoints per company', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true', WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '3' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(() => t?.close());

  const create = (key: string, idempotencyKey?: string) => t.app.inject({
    method: 'POST', url: BASE, payload: { url: 'https://hooks.example/in', event_types: ['message.sent'] },
    headers: { 'x-api-key': key, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
  });
  const count = async (key: string) => (await t.app.inject({ method: 'GET', url: BASE, headers: { 'x-api-key': key } })).json().results.length;

  it('the one over the limit is 409 {error} and registers nothing; another company is not affected; a deletion makes room', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await create(SHOP.key);
      expect(res.statusCode).toBe(201);
      ids.push(res.json().id);
    }
    const over = await create(SHOP.key);
    expect([over.statusCode, over.json()]).toEqual([409, { error: LIMIT_MESSAGE }]);
    expect(await count(SHOP.key)).toBe(3);

    expect((await create(OTHER.key)).statusCode).toBe(201);

    expect((await t.app.inject({ method: 'DELETE', url: `${BASE}${ids[0]}/`, headers: { 'x-api-key': SHOP.key } })).statusCode).toBe(204);
    expect((await create(SHOP.key)).statusCode).toBe(201);
    expect(await count(SHOP.key)).toBe(3);
  });

  it('a keyed creation run again after a crash (endpoint made, answer never recorded) still answers its endpoint at the limit', async () => {
    const deps = webhookEndpointDepsOf(t.services);
    const who = { actor: 'test', companyId: OTHER.companyId };
    const input = { url: 'https://hooks.example/keyed', eventTypes: ['message.read' as const], description: null };
    while ((await count(OTHER.key)) < 2) expect((await create(OTHER.key)).statusCode).toBe(201);
    const made = await createWebhookEndpoint(deps, who, input, 'at-the-limit'); // the third: the company is now full
    expect(await count(OTHER.key)).toBe(3);
    const retried = await create(OTHER.key, 'at-the-limit'); // no recorded answer: the creation runs again
    expect(retried.statusCode).toBe(201);
    expect(retried.json()).toMatchObject({ id: made.endpointId, secret: made.secret });
    expect([(await create(OTHER.key, 'a-new-key')).statusCode, await count(OTHER.key)]).toEqual([409, 3]);
  });

  it('a keyed creation refused at the limit is kept as every 4xx but 400, 404 and 429: the same key replays the 409, a new key creates once there is room', async () => {
    const cap = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true', WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '1' } });
    try {
      await seedFixture(cap.services, sendsFixture(), { actor: 'test' });
      const post = (key?: string) => cap.app.inject({
        method: 'POST', url: BASE, payload: { url: 'https://hooks.example/in', event_types: ['message.sent'] },
        headers: { 'x-api-key': SHOP.key, ...(key ? { 'idempotency-key': key } : {}) },
      });
      const first = (await post()).json().id as string;
      expect((await post('at-the-limit')).statusCode).toBe(409);
      expect((await cap.app.inject({ method: 'DELETE', url: `${BASE}${first}/`, headers: { 'x-api-key': SHOP.key } })).statusCode).toBe(204);
      const replayed = await post('at-the-limit');
      expect([replayed.statusCode, replayed.headers['idempotent-replayed']]).toEqual([409, 'true']);
      expect((await post('made-room')).statusCode).toBe(201);
    } finally {
      await cap.close();
    }
  });
});
