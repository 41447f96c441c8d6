import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { IN_FLIGHT_WAIT_MS, requestFingerprint } from '../../src/http/idempotency';
import { EXPORT_PATH } from '../../src/http/routes/export';
import { createTestApp } from '../support/services';
import { SHOP, sendsFixture } from '../support/sends';

// Review of issue #16 on the real app and Postgres: the Idempotency-Key's header edge cases over a real socket
// (Node's parser, not inject's), and the answers whose OpenAPI schemas the review documented (a malformed key's 400
// on the endpoint actions, the replays, the in-flight 409, the rate limit's 429 per error shape) still answer in
// the spec's shapes. docs/idempotency.md, docs/rate-limits.md.

const UPSERT = '/api/v1/external/contacts/upsert/';
const ENDPOINTS = '/api/v1/webhook-endpoints/';

/** One request over a raw socket, headers written as given (repeated, any case, any spacing); status and body back. */
function rawPost(port: number, path: string, headerLines: string[], body: string): Promise<{ status: number; replayed: boolean; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write([`POST ${path} HTTP/1.1`, 'Host: localhost', `X-API-Key: ${SHOP.key}`, 'Content-Type: application/json',
        `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close', ...headerLines, '', body].join('\r\n'));
    });
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('end', () => {
      const [head, ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), replayed: /\r\nidempotent-replayed: true/i.test(head), body: rest.join('\r\n\r\n') });
    });
    socket.on('error', reject);
  });
}

describe('Idempotency-Key over real HTTP, and the keyed answers', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let port: number;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  const upsertBody = (phone: string) => JSON.stringify({ phone, full_name: 'Iris' });
  const keyed = (...lines: string[]) => lines.map((l) => `Idempotency-Key:${l}`);

  it('whitespace around the value is not part of the key (HTTP strips it): " k " and "k" are one key', async () => {
    const first = await rawPost(port, UPSERT, keyed('   spaced-key\t '), upsertBody('+5491155558801'));
    expect(first).toMatchObject({ status: 201, replayed: false });
    const again = await rawPost(port, UPSERT, keyed('spaced-key'), upsertBody('+5491155558801'));
    expect(again).toEqual({ ...first, replayed: true });
  });

  it('the header repeated, in any case, is 400 "sent once"; only spaces is an empty key, 400', async () => {
    for (const lines of [keyed(' a', ' a'), [...keyed(' a'), 'IDEMPOTENCY-KEY: a'], [...keyed(' a'), 'idempotency-key:']]) {
      const res = await rawPost(port, UPSERT, lines, upsertBody('+5491155558802'));
      expect({ lines, status: res.status, body: JSON.parse(res.body) }).toEqual({ lines, status: 400, body: { error: 'Idempotency-Key must be sent once.' } });
    }
    const blank = await rawPost(port, UPSERT, keyed('    '), upsertBody('+5491155558802'));
    expect({ status: blank.status, body: JSON.parse(blank.body) }).toEqual({ status: 400, body: { error: 'Idempotency-Key must be 1 to 255 printable ASCII characters.' } });
  });

  it('255 characters pass and 256 do not; Latin-1 bytes are not printable ASCII; the quoted form is a key of its own', async () => {
    expect((await rawPost(port, UPSERT, keyed(` ${'x'.repeat(255)}`), upsertBody('+5491155558803'))).status).toBe(201);
    for (const key of ['y'.repeat(256), 'caf\xe9']) {
      const res = await rawPost(port, UPSERT, keyed(` ${key}`), upsertBody('+5491155558803'));
      expect({ key, status: res.status, body: JSON.parse(res.body) })
        .toEqual({ key, status: 400, body: { error: 'Idempotency-Key must be 1 to 255 printable ASCII characters.' } });
    }
    expect(await rawPost(port, UPSERT, keyed(' "quoted"'), upsertBody('+5491155558804'))).toMatchObject({ status: 201, replayed: false });
    expect(await rawPost(port, UPSERT, keyed(' quoted'), upsertBody('+5491155558804'))).toMatchObject({ status: 200, replayed: false });
    expect(await rawPost(port, UPSERT, keyed(' "quoted"'), upsertBody('+5491155558804'))).toMatchObject({ status: 201, replayed: true });
  });

  it('the same body in other bytes (spacing, key order, 1.0 for 1) is the same request; another body is 422', async () => {
    const first = await rawPost(port, UPSERT, keyed(' same-bytes'), '{"phone":"+5491155558805","full_name":"Iris","contact_list_id":3001}');
    expect(first.status).toBe(201);
    const respelled = '{ "contact_list_id" : 3001.0, "full_name" : "Iris",\n "phone":"+5491155558805" }';
    expect(await rawPost(port, UPSERT, keyed(' same-bytes'), respelled)).toEqual({ ...first, replayed: true });
    expect((await rawPost(port, UPSERT, keyed(' same-bytes'), '{"phone":"+5491155558805","full_name":"Iri","contact_list_id":3001}')).status).toBe(422);
  });

  it("the upsert compares the body as sent: camelCase for snake_case, or a default spelled out, is another request (422)", async () => {
    expect((await rawPost(port, UPSERT, keyed(' casing'), '{"phone":"+5491155558806","full_name":"Iris"}')).status).toBe(201);
    for (const body of ['{"phone":"+5491155558806","fullName":"Iris"}', '{"phone":"+5491155558806","full_name":"Iris","source":"api"}']) {
      const res = await rawPost(port, UPSERT, keyed(' casing'), body);
      expect({ body, status: res.status, answer: JSON.parse(res.body) })
        .toEqual({ body, status: 422, answer: { error: 'This Idempotency-Key was already used with a different request.' } });
    }
  });

  it('the endpoint actions answer a malformed key with a plain 400 and replay their first answer', async () => {
    const created = await t.app.inject({
      method: 'POST', url: ENDPOINTS, payload: { url: 'https://hooks.example/r16', event_types: ['message.sent'] }, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'r16-create' },
    });
    expect(created.statusCode).toBe(201);
    const replayed = await t.app.inject({
      method: 'POST', url: ENDPOINTS, payload: { url: 'https://hooks.example/r16', event_types: ['message.sent'] }, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'r16-create' },
    });
    expect({ status: replayed.statusCode, replayed: replayed.headers['idempotent-replayed'], body: replayed.body })
      .toEqual({ status: 201, replayed: 'true', body: created.body });
    const id = created.json().id;
    for (const action of ['rotate-secret/', 'test/', `deliveries/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}/retry/`]) {
      const res = await t.app.inject({ method: 'POST', url: `${ENDPOINTS}${id}/${action}`, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'k'.repeat(256) } });
      expect({ action, status: res.statusCode, body: res.json() }).toEqual({ action, status: 400, body: { error: 'Idempotency-Key must be 1 to 255 printable ASCII characters.' } });
    }
    const rotate = () => t.app.inject({ method: 'POST', url: `${ENDPOINTS}${id}/rotate-secret/`, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'r16-rotate' } });
    const rotated = await rotate();
    expect(rotated.statusCode).toBe(200);
    const again = await rotate();
    expect({ status: again.statusCode, replayed: again.headers['idempotent-replayed'], body: again.body }).toEqual({ status: 200, replayed: 'true', body: rotated.body });
  });

  it('a repeat while the first upsert is in flight waits, then answers 409 in the plain shape with Retry-After', async () => {
    const body = { phone: '+5491155558807', full_name: 'Iris' };
    const now = t.services.now();
    await t.db.pool.query(
      `INSERT INTO public.idempotency_keys (company_id, key, fingerprint, state, lease_until, created_at, expires_at)
       VALUES ($1, 'r16-in-flight', $2, 'in_flight', $3, $4, $5)`,
      [SHOP.companyId, requestFingerprint('POST', UPSERT, {}, body), new Date(now.getTime() + 60_000), now, new Date(now.getTime() + 86_400_000)],
    );
    const res = await t.app.inject({ method: 'POST', url: UPSERT, payload: body, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'r16-in-flight' } });
    expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 409, body: { error: 'A request with this Idempotency-Key is still being processed; retry later.' } });
    // the first's lease: 60 s less the repeat's wait (IN_FLIGHT_WAIT_MS)
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60 - IN_FLIGHT_WAIT_MS / 1000);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });
});

describe('the rate limit\'s 429 in each error shape', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let clock = Date.parse('2026-03-01T10:00:15.000Z');

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(clock), env: { RATE_LIMIT_PER_MINUTE: '1' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('plain on the upsert, the send, the bulk detail and the endpoints; export-shaped on the export; with the headers', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/business-accounts/', headers: { 'x-api-key': SHOP.key } })).statusCode).toBe(200);
    const message = 'rate limit exceeded: at most 1 request per minute per API key; retry in 45 seconds';
    const calls = [
      { method: 'POST' as const, url: UPSERT, payload: { phone: '+5491155558808' } },
      { method: 'POST' as const, url: '/api/v1/platform-templates/send/', payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155558808' } },
      { method: 'GET' as const, url: '/api/v1/platform-templates/bulk-sends/6f1c2b3a-0000-4000-8000-000000000000/' },
      { method: 'GET' as const, url: ENDPOINTS },
    ];
    for (const call of calls) {
      const res = await t.app.inject({ ...call, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'r16-limited' } });
      expect({ url: call.url, status: res.statusCode, body: res.json(), retryAfter: res.headers['retry-after'], limit: res.headers['ratelimit-limit'], remaining: res.headers['ratelimit-remaining'] })
        .toEqual({ url: call.url, status: 429, body: { error: message }, retryAfter: '45', limit: '1', remaining: '0' });
    }
    const exported = await t.app.inject({ method: 'GET', url: `${EXPORT_PATH}?company_id=${SHOP.companyId}&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z`, headers: { 'x-api-key': SHOP.key } });
    expect({ status: exported.statusCode, body: exported.json() }).toEqual({ status: 429, body: { error: { code: 'RATE_LIMITED', message } } });
  });

  it('a repeat under an Idempotency-Key counts like any request: over the limit it is 429, and the next minute replays', async () => {
    clock = Date.parse('2026-03-01T10:05:30.000Z');
    const upsert = () => t.app.inject({
      method: 'POST', url: UPSERT, payload: { phone: '+5491155558809', full_name: 'Iris' }, headers: { 'x-api-key': SHOP.key, 'idempotency-key': 'r16-counted' },
    });
    const first = await upsert();
    expect(first.statusCode).toBe(201);
    const limited = await upsert();
    expect({ status: limited.statusCode, replayed: limited.headers['idempotent-replayed'], retryAfter: limited.headers['retry-after'] })
      .toEqual({ status: 429, replayed: undefined, retryAfter: '30' });
    clock += 30_000;
    const replayed = await upsert();
    expect({ status: replayed.statusCode, replayed: replayed.headers['idempotent-replayed'], body: replayed.body }).toEqual({ status: 201, replayed: 'true', body: first.body });
  });
});
