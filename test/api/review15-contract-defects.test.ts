import type { AddressInfo } from 'node:net';
import Ajv from 'ajv';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXPORT_PATH } from '../../src/http/routes/export';
import { EXAMPLE, exampleFixture } from '../support/provisioning';
import { SHOP, sendsFixture } from '../support/sends';
import { createTestApp } from '../support/services';

// Review 15c, the defects the contract walk found (test/api/review15-contract-openapi-walk.test.ts walks them all),
// each pinned on its own over real HTTP. docs/conventions.md, "Contract review (2026-11-28)".

type Operation = { responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, { schema: any }> }> };

const NO_ACCESS = { error: 'this API key has no access to company resources' };
const plainError = { type: 'object', properties: { error: { type: 'string' } }, required: ['error'], additionalProperties: false };
const exportError = {
  type: 'object',
  properties: { error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } }, required: ['code', 'message'] } },
  required: ['error'],
};

describe('review 15c: contract defects', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let base: string;
  let doc: { paths: Record<string, Record<string, Operation>> };

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    doc = (await (await fetch(`${base}/openapi.json`)).json()) as typeof doc;
  });
  afterAll(async () => {
    await t?.close();
  });

  const call = async (method: string, path: string, key: string, body?: string) => {
    const res = await fetch(`${base}${path}`, {
      method, body, headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it('a global key on a company route is 403 whatever its body, query or path (it was 400 where the route validated first)', async () => {
    const some = '00000000-0000-4000-8000-000000000000';
    const refused: Array<[string, string, string?]> = [
      ['POST', '/api/v1/platform-templates/send/', '{}'],
      ['POST', '/api/v1/platform-templates/send-bulk/', '{"recipients":[]}'],
      ['GET', '/api/v1/platform-templates/bulk-sends/?status=NOPE&page=0'],
      ['GET', '/api/v1/platform-templates/bulk-sends/not-a-uuid/'],
      ['GET', '/api/v1/platform-templates/bulk-sends/not-a-uuid/messages/?status=bogus'],
      ['POST', '/api/v1/platform-templates/bulk-sends/not-a-uuid/cancel/'],
      ['POST', '/api/v1/webhook-endpoints/', '{}'],
      ['PATCH', `/api/v1/webhook-endpoints/${some}/`, '{"bogus":1}'],
      ['POST', `/api/v1/webhook-endpoints/${some}/recover/`, '{}'],
      ['GET', `/api/v1/webhook-endpoints/${some}/deliveries/?page=abc`],
    ];
    for (const [method, path, body] of refused) {
      expect({ method, path, ...(await call(method, path, EXAMPLE.globalKey, body)) }).toEqual({ method, path, status: 403, body: NO_ACCESS });
    }
    // a company key still gets the route's own 400
    expect((await call('POST', '/api/v1/platform-templates/send/', SHOP.key, '{}')).status).toBe(400);
    expect((await call('GET', '/api/v1/platform-templates/bulk-sends/?status=NOPE', SHOP.key)).status).toBe(400);
  });

  it('the single send, the message status and every bulk route document their 401 and 403 (plain {error})', () => {
    const routes: Array<[string, string]> = [
      ['post', '/api/v1/platform-templates/send/'],
      ['get', '/api/v1/platform-templates/messages/{message_id}/'],
      ['post', '/api/v1/platform-templates/send-bulk/'],
      ['get', '/api/v1/platform-templates/bulk-sends/'],
      ['get', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/'],
      ['get', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/'],
      ['post', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/cancel/'],
    ];
    for (const [method, path] of routes) {
      const responses = doc.paths[path][method].responses;
      for (const status of ['401', '403']) {
        expect({ at: `${method} ${path} ${status}`, schema: responses[status]?.content?.['application/json']?.schema })
          .toEqual({ at: `${method} ${path} ${status}`, schema: plainError });
      }
    }
  });

  it('the export documents its NDJSON page and its 400, 401, 403, 429 and 503 in the export error shape', () => {
    const responses = doc.paths[EXPORT_PATH].get.responses;
    expect(Object.keys(responses).sort()).toEqual(['200', '400', '401', '403', '429', '503']); // 503: a graceful stop (shared-refusal-docs.ts)
    expect(Object.keys(responses['200'].content ?? {})).toEqual(['application/x-ndjson']);
    for (const status of ['400', '401', '403', '429', '503']) {
      expect({ status, schema: responses[status].content?.['application/json']?.schema }).toMatchObject({ status, schema: exportError });
    }
    expect(Object.keys(responses['429'].headers ?? {}).sort()).toEqual(['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after']);
  });

  it('documents the query parameters the spec requires as required (phone; company_id, from, to), their refusals unchanged', async () => {
    const required = (path: string) => Object.fromEntries((doc.paths[path].get as any).parameters.filter((p: any) => p.in === 'query').map((p: any) => [p.name, p.required]));
    expect(required('/api/v1/contact-lookup/')).toEqual({ phone: true });
    expect(required('/api/v1/external/contacts/')).toEqual({ phone: true });
    expect(required(EXPORT_PATH)).toMatchObject({ company_id: true, from: true, to: true, channel: false, limit: false, cursor: false });

    for (const path of ['/api/v1/contact-lookup/', '/api/v1/external/contacts/']) {
      expect(await call('GET', path, EXAMPLE.key)).toEqual({ status: 400, body: { error: 'phone is required' } });
      expect(await call('GET', `${path}?phone=`, EXAMPLE.key)).toEqual({ status: 400, body: { error: 'phone is required' } });
      expect(await call('GET', `${path}?phone=1&phone=2`, EXAMPLE.key)).toEqual({ status: 400, body: { error: 'phone: Invalid input: expected string, received array' } });
      expect((await call('GET', `${path}?phone=%2B14155550000`, EXAMPLE.key)).body.found).toBe(false);
    }
    const invalid = (message: string) => ({ status: 400, body: { error: { code: 'INVALID_PARAMETER', message } } });
    expect(await call('GET', `${EXPORT_PATH}?from=2026-01-01`, EXAMPLE.key)).toEqual(invalid('company_id is required'));
    expect(await call('GET', `${EXPORT_PATH}?company_id=101&to=2026-01-02`, EXAMPLE.key)).toEqual(invalid('from is required (ISO 8601)'));
    expect(await call('GET', `${EXPORT_PATH}?company_id=101&from=2026-01-01`, EXAMPLE.key)).toEqual(invalid('to is required (ISO 8601)'));
    expect(await call('GET', `${EXPORT_PATH}?company_id=101&limit=1&limit=2`, EXAMPLE.key))
      .toEqual(invalid('limit: Invalid input: expected string, received array'));
    const ok = await fetch(`${base}${EXPORT_PATH}?company_id=101&from=2026-01-01&to=2026-01-02`, { headers: { 'x-api-key': EXAMPLE.key } });
    expect([ok.status, ok.headers.get('content-type'), await ok.text()]).toEqual([200, 'application/x-ndjson', '']);
  });

  it("the send documents its 400 as the field errors or {error} (it was any JSON: a drift of the send's 400 passed)", () => {
    const schema = doc.paths['/api/v1/platform-templates/send/'].post.responses['400'].content!['application/json'].schema;
    const valid = new Ajv({ strict: false }).compile(schema);
    expect([{ recipient_phone: ['This field is required.'] }, { error: 'request body is not valid JSON' }].map((b) => valid(b))).toEqual([true, true]);
    expect([{ detail: 'x' }, { recipient_phone: 'This field is required.' }, ['x']].map((b) => valid(b))).toEqual([false, false, false]);
  });

  it('describes the refusals every route shares once per operation (a GET\'s HEAD shares its schema: regression review 15g)', () => {
    const repeated: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const status of ['429', '503']) {
          const parts = ((op.responses[status] as { description?: string } | undefined)?.description ?? '').split('; or ');
          if (new Set(parts).size !== parts.length) repeated.push(`${method} ${path} ${status}`);
        }
      }
    }
    expect(repeated).toEqual([]);
    const deleted = (doc.paths['/api/v1/webhook-endpoints/{id}/'].delete.responses['503'] as { description: string }).description;
    expect(deleted).toContain('READ_MODELS_BEHIND'); // a DELETE is a write
  });

  it("the send's 503 (its outcome unknown) documents the Retry-After it carries", () => {
    const unknown = doc.paths['/api/v1/platform-templates/send/'].post.responses['503'];
    expect(unknown.headers).toMatchObject({ 'retry-after': { schema: { type: 'integer' } } });
    expect(unknown.content!['application/json'].schema).toMatchObject({ properties: { error: { type: 'string' } }, required: ['error'] });
  });
});

