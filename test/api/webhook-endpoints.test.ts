import { seedFixture } from '../../src/commands/provisioning/seed';
import { createWebhookEndpoint, deleteWebhookEndpoint, keyedEndpointId, rotateWebhookSecret, webhookEndpointDepsOf } from '../../src/commands/webhook-endpoint/handler';
import { secretBox } from '../../src/commands/webhook-endpoint/secrets';
import { createTestApp, TEST_PEPPER } from '../support/services';
import { OTHER, SHOP, sendsFixture } from '../support/sends';

// The webhook endpoints API (docs/webhooks.md) on the real app and Postgres, company keys only.

const BASE = '/api/v1/webhook-endpoints/';
const NOW = new Date('2026-03-01T10:00:00.000Z');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const SECRET = /^whsec_[A-Za-z0-9+/]{32}$/;

describe('webhook endpoints API', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let strict: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => NOW, env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    strict = await createTestApp({ now: () => NOW });
    await seedFixture(strict.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
    await strict?.close();
  });

  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, key: string | null = SHOP.key, app = t) =>
    app.app.inject({ method, url, ...(body === undefined ? {} : { payload: body as object }), headers: key === null ? {} : { 'x-api-key': key } });
  const create = async (body: unknown = { url: 'https://hooks.example/in', event_types: ['message.delivered', 'message.read'] }) => {
    const res = await call('POST', BASE, body);
    expect(res.statusCode).toBe(201);
    return res.json();
  };

  it('creates an endpoint, returning its secret once; get and list never show it', async () => {
    const res = await call('POST', BASE, { url: 'https://hooks.example/in', event_types: ['message.delivered', 'message.read', 'message.read'], description: 'CRM' });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      id: expect.stringMatching(UUID), url: 'https://hooks.example/in', event_types: ['message.delivered', 'message.read'], description: 'CRM',
      enabled: true, disabled_reason: null, created_at: NOW.toISOString(), updated_at: NOW.toISOString(), secret: expect.stringMatching(SECRET),
    });
    const { secret, ...shown } = body;
    expect((await call('GET', `${BASE}${body.id}/`)).json()).toEqual(shown);
    const list = (await call('GET', BASE)).json();
    expect(list.results).toContainEqual(shown);
    expect(JSON.stringify(list)).not.toContain(secret);
    // the event log holds the secret sealed only
    const logged = await t.db.pool.query(`SELECT data FROM es.events WHERE type = 'WebhookEndpointCreated'`);
    expect(logged.rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(logged.rows)).not.toContain(secret);
    const row = await t.db.pool.query('SELECT secret FROM rm_webhooks.endpoints WHERE endpoint_id = $1', [body.id]);
    expect(secretBox(TEST_PEPPER).open(row.rows[0].secret)).toBe(secret);
  });

  it('refuses bad bodies with 400 in the plain shape, creating nothing', async () => {
    const before = (await call('GET', BASE)).json().results.length;
    const cases: Array<[unknown, string]> = [
      [{ event_types: ['message.sent'] }, 'url'],
      [{ url: 'https://hooks.example/in', event_types: [] }, 'event_types'],
      [{ url: 'https://hooks.example/in', event_types: ['message.bounced'] }, 'event types must be among'],
      [{ url: 'https://hooks.example/in', event_types: ['message.sent'], secret: 'mine' }, 'secret'],
      [{ url: 'not a url', event_types: ['message.sent'] }, 'url must be an absolute URL'],
    ];
    for (const [body, text] of cases) {
      const res = await call('POST', BASE, body);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: expect.stringContaining(text) });
    }
    expect((await call('GET', BASE)).json().results.length).toBe(before);
  });

  it('refuses http, private, loopback and link-local URLs unless the operator allows them', async () => {
    const refused: Array<[string, string]> = [
      ['http://hooks.example/in', 'url must use https'],
      ['https://127.0.0.1/in', 'url must not point to a private, loopback or link-local address'],
      ['https://localhost:8443/in', 'url must not point to a private, loopback or link-local address'],
      ['https://10.1.2.3/in', 'url must not point to a private, loopback or link-local address'],
      ['https://169.254.169.254/latest/meta-data', 'url must not point to a private, loopback or link-local address'],
      ['https://[::1]/in', 'url must not point to a private, loopback or link-local address'],
      ['https://[::ffff:192.168.0.1]/in', 'url must not point to a private, loopback or link-local address'],
      ['https://localhost./in', 'url must not point to a private, loopback or link-local address'],
      ['https://[64:ff9b::a9fe:a9fe]/latest/meta-data', 'url must not point to a private, loopback or link-local address'],
    ];
    for (const [url, error] of refused) {
      const res = await call('POST', BASE, { url, event_types: ['message.sent'] }, SHOP.key, strict);
      expect({ url, status: res.statusCode, body: res.json() }).toEqual({ url, status: 400, body: { error } });
    }
    expect((await call('GET', BASE, undefined, SHOP.key, strict)).json()).toEqual({ results: [] });
    const allowed = await call('POST', BASE, { url: 'http://127.0.0.1:9/in', event_types: ['message.sent'] });
    expect(allowed.statusCode).toBe(201);
  });

  it('changes event types and description, disables and enables', async () => {
    const ep = await create();
    const patched = await call('PATCH', `${BASE}${ep.id}/`, { event_types: ['message.failed'], description: 'ops', enabled: false });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toEqual({
      id: ep.id, url: 'https://hooks.example/in', event_types: ['message.failed'], description: 'ops', enabled: false, disabled_reason: 'client',
      created_at: NOW.toISOString(), updated_at: NOW.toISOString(),
    });
    const enabled = await call('PATCH', `${BASE}${ep.id}/`, { enabled: true });
    expect(enabled.json()).toMatchObject({ enabled: true, disabled_reason: null, event_types: ['message.failed'] });
    const bad = await call('PATCH', `${BASE}${ep.id}/`, { enabled: 'yes' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: expect.stringContaining('enabled must be a boolean') });
    const badUrl = await call('PATCH', `${BASE}${ep.id}/`, { url: 'ftp://hooks.example' });
    expect(badUrl.json()).toEqual({ error: 'url must use https' });
  });

  it('rotates the secret: a new one, returned once', async () => {
    const ep = await create();
    const res = await call('POST', `${BASE}${ep.id}/rotate-secret/`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({ ...ep, secret: expect.stringMatching(SECRET) });
    expect(body.secret).not.toBe(ep.secret);
    const row = await t.db.pool.query('SELECT secret, previous_secret, previous_valid_until FROM rm_webhooks.endpoints WHERE endpoint_id = $1', [ep.id]);
    const box = secretBox(TEST_PEPPER);
    expect([box.open(row.rows[0].secret), box.open(row.rows[0].previous_secret), row.rows[0].previous_valid_until.toISOString()])
      .toEqual([body.secret, ep.secret, '2026-03-02T10:00:00.000Z']);
  });

  it('deletes: then 404 everywhere', async () => {
    const ep = await create();
    const del = await call('DELETE', `${BASE}${ep.id}/`);
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    for (const [method, url] of [['GET', `${BASE}${ep.id}/`], ['PATCH', `${BASE}${ep.id}/`], ['DELETE', `${BASE}${ep.id}/`], ['POST', `${BASE}${ep.id}/rotate-secret/`],
      ['GET', `${BASE}${ep.id}/deliveries/`], ['POST', `${BASE}${ep.id}/recover/`], ['POST', `${BASE}${ep.id}/test/`]] as const) {
      const body = method === 'PATCH' ? { enabled: false } : url.endsWith('/recover/') ? { since: NOW.toISOString() } : undefined;
      const res = await call(method, url, body);
      expect({ method, url, status: res.statusCode, body: res.json() }).toEqual({ method, url, status: 404, body: { error: 'webhook endpoint not found' } });
    }
  });

  it("isolates companies: another company's endpoint is 404 and not listed", async () => {
    const ep = await create();
    expect((await call('GET', `${BASE}${ep.id}/`, undefined, OTHER.key)).statusCode).toBe(404);
    expect((await call('PATCH', `${BASE}${ep.id}/`, { enabled: false }, OTHER.key)).json()).toEqual({ error: 'webhook endpoint not found' });
    expect((await call('GET', BASE, undefined, OTHER.key)).json()).toEqual({ results: [] });
    expect((await call('GET', `${BASE}not-a-uuid/`)).json()).toEqual({ error: 'webhook endpoint not found' });
    expect((await call('POST', `${BASE}${ep.id}/deliveries/nope/retry/`)).json()).toEqual({ error: 'delivery not found' });
  });

  it('401 without a valid key', async () => {
    for (const key of [null, 'sbk_nope']) {
      const res = await call('GET', BASE, undefined, key);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: expect.any(String) });
    }
    expect((await call('POST', BASE, { url: 'https://x.example', event_types: ['message.sent'] }, null)).statusCode).toBe(401);
  });

  it('queues a test event and lists its delivery; a delivery can be queued again; unknown delivery 404', async () => {
    const ep = await create();
    const queued = await call('POST', `${BASE}${ep.id}/test/`);
    expect(queued.statusCode).toBe(202);
    expect(queued.json()).toEqual({ delivery_id: expect.stringMatching(UUID), webhook_id: expect.stringMatching(/^msg_/), status: 'queued' });
    const stored = await t.db.pool.query('SELECT event_type, payload, status FROM webhooks.deliveries WHERE delivery_id = $1', [queued.json().delivery_id]);
    expect(stored.rows[0].event_type).toBe('webhook.test');
    expect(JSON.parse(stored.rows[0].payload)).toEqual({ type: 'webhook.test', timestamp: NOW.toISOString(), data: { endpoint_id: ep.id, message: 'test event from Switchboard' } });
    const retry = await call('POST', `${BASE}${ep.id}/deliveries/${queued.json().delivery_id}/retry/`);
    expect(retry.statusCode).toBe(202);
    expect(retry.json()).toEqual(queued.json());
    const unknown = await call('POST', `${BASE}${ep.id}/deliveries/0d7a3c52-6a35-4c0f-9a1e-5b8c2f1d9e01/retry/`);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: 'delivery not found' });
    const page = await call('GET', `${BASE}${ep.id}/deliveries/?page_size=0`);
    expect(page.statusCode).toBe(400);
    expect(page.json()).toEqual({ error: expect.stringContaining('page_size must be a positive integer') });
    const empty = await call('GET', `${BASE}${ep.id}/deliveries/`);
    expect(empty.json()).toEqual({ count: 0, next: null, previous: null, results: [] });
  });

  it('a test event or a retry to a disabled endpoint is set aside (no due time) and due again when it is enabled', async () => {
    const ep = await create();
    const due = async (deliveryId: string) =>
      (await t.db.pool.query<{ next_attempt_at: Date | null }>('SELECT next_attempt_at FROM webhooks.deliveries WHERE delivery_id = $1', [deliveryId])).rows[0].next_attempt_at;
    const first = (await call('POST', `${BASE}${ep.id}/test/`)).json().delivery_id as string;
    expect(await due(first)).toEqual(NOW);
    expect((await call('PATCH', `${BASE}${ep.id}/`, { enabled: false })).statusCode).toBe(200);
    expect(await due(first)).toBeNull();
    const second = await call('POST', `${BASE}${ep.id}/test/`);
    expect(second.statusCode).toBe(202);
    expect(await due(second.json().delivery_id)).toBeNull();
    const retried = await call('POST', `${BASE}${ep.id}/deliveries/${first}/retry/`);
    expect(retried.statusCode).toBe(202);
    expect(await due(first)).toBeNull();
    expect((await call('PATCH', `${BASE}${ep.id}/`, { enabled: true })).statusCode).toBe(200);
    expect([await due(first), await due(second.json().delivery_id)]).toEqual([NOW, NOW]);
    const again = await call('POST', `${BASE}${ep.id}/deliveries/${first}/retry/`);
    expect(again.statusCode).toBe(202);
    expect(await due(first)).toEqual(NOW);
  });

  it('a retry makes a pending delivery due now keeping its attempts (its ~3-day schedule goes on); a failed one starts afresh', async () => {
    const ep = await create();
    const id = (await call('POST', `${BASE}${ep.id}/test/`)).json().delivery_id as string;
    const row = async () => (await t.db.pool.query('SELECT status, attempts, next_attempt_at FROM webhooks.deliveries WHERE delivery_id = $1', [id])).rows[0];
    await t.db.pool.query(`UPDATE webhooks.deliveries SET attempts = 5, next_attempt_at = $2 WHERE delivery_id = $1`, [id, new Date(NOW.getTime() + 3_600_000)]);
    expect((await call('POST', `${BASE}${ep.id}/deliveries/${id}/retry/`)).statusCode).toBe(202);
    expect(await row()).toEqual({ status: 'pending', attempts: 5, next_attempt_at: NOW });
    await t.db.pool.query(`UPDATE webhooks.deliveries SET status = 'failed', attempts = 17, next_attempt_at = NULL, completed_at = $2 WHERE delivery_id = $1`, [id, NOW]);
    expect((await call('POST', `${BASE}${ep.id}/deliveries/${id}/retry/`)).statusCode).toBe(202);
    expect(await row()).toEqual({ status: 'pending', attempts: 0, next_attempt_at: NOW });
  });

  it('creation takes an Idempotency-Key: a repeat replays the first answer, another body is 422, one endpoint', async () => {
    const keyed = (key: string, body: unknown) => t.app.inject({ method: 'POST', url: BASE, payload: body as object, headers: { 'x-api-key': SHOP.key, 'idempotency-key': key } });
    const body = { url: 'https://hooks.example/keyed', event_types: ['message.sent'] };
    const first = await keyed('ep-key-1', body);
    expect(first.statusCode).toBe(201);
    const again = await keyed('ep-key-1', body);
    expect([again.statusCode, again.headers['idempotent-replayed'], again.json()]).toEqual([201, 'true', first.json()]);
    const other = await keyed('ep-key-1', { ...body, url: 'https://hooks.example/other' });
    expect([other.statusCode, other.json()]).toEqual([422, { error: 'This Idempotency-Key was already used with a different request.' }]);
    const { secret, ...shown } = first.json();
    expect(secret).toMatch(SECRET);
    expect((await call('GET', BASE)).json().results.filter((e: { url: string }) => e.url === body.url)).toEqual([shown]);
    // the answer kept for replays holds the secret sealed, as the endpoint's own record does: nowhere in plaintext
    const kept = (await t.db.pool.query('SELECT state, body FROM public.idempotency_keys WHERE company_id = $1 AND key = $2', [SHOP.companyId, 'ep-key-1'])).rows[0];
    expect(kept.state).toBe('sealed');
    expect(kept.body).not.toContain(secret);
    expect(kept.body).not.toContain(secret.slice('whsec_'.length));
  });

  it("the endpoint's other POSTs take an Idempotency-Key too: a repeat replays the first answer and does the work once; another request under the key is 422", async () => {
    const ep = await create();
    const keyed = (url: string, key: string, body?: unknown) =>
      t.app.inject({ method: 'POST', url, ...(body === undefined ? {} : { payload: body as object }), headers: { 'x-api-key': SHOP.key, 'idempotency-key': key } });
    const twice = async (url: string, key: string, body?: unknown) => {
      const first = await keyed(url, key, body);
      const again = await keyed(url, key, body);
      expect([again.statusCode, again.headers['idempotent-replayed'], again.json()]).toEqual([first.statusCode, 'true', first.json()]);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      return first;
    };
    const rotations = async () => (await t.services.store.readStream(`webhookendpoint-${ep.id}`)).filter((e) => e.type === 'WebhookEndpointSecretRotated').length;
    const testEvents = async () => (await t.db.pool.query(`SELECT count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 AND event_type = 'webhook.test'`, [ep.id])).rows[0].n;

    const rotated = await twice(`${BASE}${ep.id}/rotate-secret/`, 'rotate-1');
    expect(rotated.statusCode).toBe(200);
    expect(rotated.json().secret).toMatch(SECRET);
    expect(await rotations()).toBe(1); // one rotation: the secret held for 24 h is still the one before it
    const tested = await twice(`${BASE}${ep.id}/test/`, 'test-1');
    expect(tested.statusCode).toBe(202);
    expect(await testEvents()).toBe(1);
    expect((await twice(`${BASE}${ep.id}/deliveries/${tested.json().delivery_id}/retry/`, 'retry-1')).statusCode).toBe(202);
    expect((await twice(`${BASE}${ep.id}/recover/`, 'recover-1', { since: NOW.toISOString() })).statusCode).toBe(202);

    const other = await create();
    const reused = await keyed(`${BASE}${other.id}/rotate-secret/`, 'rotate-1');
    expect([reused.statusCode, reused.json()]).toEqual([422, { error: 'This Idempotency-Key was already used with a different request.' }]);
    expect((await call('POST', `${BASE}${ep.id}/rotate-secret/`)).json().secret).not.toBe(rotated.json().secret); // unkeyed: rotates again
    expect(await rotations()).toBe(2);
  });

  it('a keyed creation run again after a crash (endpoint stored, answer never recorded) answers that endpoint and its secret', async () => {
    const deps = { ...webhookEndpointDepsOf(t.services), box: secretBox(TEST_PEPPER), now: () => NOW };
    const who = { actor: 'test', companyId: SHOP.companyId };
    const input = { url: 'https://hooks.example/crash', eventTypes: ['message.read' as const], description: null };
    const firstRun = await createWebhookEndpoint(deps, who, input, 'ep-crash-1');
    expect(firstRun.endpointId).toBe(keyedEndpointId(SHOP.companyId, 'ep-crash-1'));
    const retry = await t.app.inject({
      method: 'POST', url: BASE, payload: { url: input.url, event_types: input.eventTypes }, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'ep-crash-1' },
    });
    expect(retry.statusCode).toBe(201);
    expect(retry.json()).toMatchObject({ id: firstRun.endpointId, url: input.url, secret: firstRun.secret });
    const rows = await t.db.pool.query('SELECT count(*)::int AS n FROM rm_webhooks.endpoints WHERE url = $1', [input.url]);
    expect(rows.rows[0].n).toBe(1);
  });

  it("after the key expired (24 h) the same key registers a new endpoint (the key's next use), even once the earlier one was deleted", async () => {
    let now = NOW;
    const deps = { ...webhookEndpointDepsOf(t.services), box: secretBox(TEST_PEPPER), now: () => now };
    const who = { actor: 'test', companyId: SHOP.companyId };
    const input = (url: string) => ({ url, eventTypes: ['message.read' as const], description: null });
    const first = await createWebhookEndpoint(deps, who, input('https://hooks.example/day-1'), 'ep-daily');
    expect(first.endpointId).toBe(keyedEndpointId(SHOP.companyId, 'ep-daily'));
    now = new Date(NOW.getTime() + 24 * 3600_000 + 1000);
    const second = await createWebhookEndpoint(deps, who, input('https://hooks.example/day-2'), 'ep-daily');
    expect(second.endpointId).toBe(keyedEndpointId(SHOP.companyId, 'ep-daily', 1));
    expect(second.secret).not.toBe(first.secret);
    // within the second use, its crash retry answers its own endpoint
    expect(await createWebhookEndpoint(deps, who, input('https://hooks.example/day-2'), 'ep-daily')).toEqual(second);
    await deleteWebhookEndpoint(deps, who, second.endpointId);
    now = new Date(NOW.getTime() + 48 * 3600_000 + 2000);
    const third = await createWebhookEndpoint(deps, who, input('https://hooks.example/day-3'), 'ep-daily');
    expect(third.endpointId).toBe(keyedEndpointId(SHOP.companyId, 'ep-daily', 2));
    const urls = await t.db.pool.query<{ url: string }>('SELECT url FROM rm_webhooks.endpoints WHERE url LIKE $1 ORDER BY url', ['https://hooks.example/day-%']);
    expect(urls.rows.map((r) => r.url)).toEqual(['https://hooks.example/day-1', 'https://hooks.example/day-3']);
  });

  it('a keyed rotation run again after a crash (rotated, answer never recorded) answers its secret and does not rotate twice; a new key or 24 h later rotates', async () => {
    const ep = await create();
    let now = NOW;
    const deps = { ...webhookEndpointDepsOf(t.services), box: secretBox(TEST_PEPPER), now: () => now };
    const who = { actor: 'test', companyId: SHOP.companyId };
    const rotations = async () => (await t.services.store.readStream(`webhookendpoint-${ep.id}`)).filter((e) => e.type === 'WebhookEndpointSecretRotated').length;
    const first = await rotateWebhookSecret(deps, who, ep.id, 'rot-crash-1');
    expect(first).toMatch(SECRET);
    const retry = await t.app.inject({ method: 'POST', url: `${BASE}${ep.id}/rotate-secret/`, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'rot-crash-1' } });
    expect([retry.statusCode, retry.json().secret, await rotations()]).toEqual([200, first, 1]);
    const second = await rotateWebhookSecret(deps, who, ep.id, 'rot-crash-2');
    expect([second === first, await rotations()]).toEqual([false, 2]);
    now = new Date(NOW.getTime() + 24 * 60 * 60 * 1000);
    expect(await rotateWebhookSecret(deps, who, ep.id, 'rot-crash-2')).not.toBe(second); // the key's 24 h are over: a new rotation
    expect(await rotations()).toBe(3);
  });

  it('a keyed rotation racing another rotation (one lands between its read and its append) is made again for the new count: run again after a crash, it answers its secret and does not rotate', async () => {
    const ep = await create();
    const stream = `webhookendpoint-${ep.id}`;
    const who = { actor: 'test', companyId: SHOP.companyId };
    const box = secretBox(TEST_PEPPER);
    let race = true;
    // the real store; the first read of the endpoint's stream is followed at once by another client's rotation
    const store = Object.create(t.services.store, {
      readStream: {
        value: async (id: string) => {
          const events = await t.services.store.readStream(id);
          if (race && id === stream) {
            race = false;
            await rotateWebhookSecret({ ...webhookEndpointDepsOf(t.services), box, now: () => NOW }, who, ep.id);
          }
          return events;
        },
      },
    }) as typeof t.services.store;
    const deps = { ...webhookEndpointDepsOf(t.services), store, box, now: () => NOW };
    const first = await rotateWebhookSecret(deps, who, ep.id, 'rot-race-1');
    expect(race).toBe(false);
    const rotations = async () => (await t.services.store.readStream(stream)).filter((e) => e.type === 'WebhookEndpointSecretRotated');
    expect((await rotations()).map((e) => box.open((e.data as { secret: string }).secret) === first)).toEqual([false, true]);
    const retry = await t.app.inject({ method: 'POST', url: `${BASE}${ep.id}/rotate-secret/`, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'rot-race-1' } });
    expect([retry.statusCode, retry.json().secret, (await rotations()).length]).toEqual([200, first, 2]);
  });

  it('is in the OpenAPI document', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(doc.paths).filter((p: string) => p.startsWith(BASE)).sort()).toEqual([
      BASE, `${BASE}{id}/`, `${BASE}{id}/deliveries/`, `${BASE}{id}/deliveries/{delivery_id}/retry/`, `${BASE}{id}/recover/`, `${BASE}{id}/rotate-secret/`, `${BASE}{id}/test/`,
    ]);
    const pageParams = doc.paths[`${BASE}{id}/deliveries/`].get.parameters.filter((p: { in: string }) => p.in === 'query');
    expect(pageParams.map((p: { name: string; required?: boolean }) => [p.name, p.required ?? false])).toEqual([['page', false], ['page_size', false], ['before', false], ['after', false]]);
    expect(pageParams.find((p: { name: string }) => p.name === 'before').schema).toMatchObject({ type: 'string', pattern: '^[1-9][0-9]{0,15}$' });
  });
});
