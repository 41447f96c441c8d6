import type { AddressInfo } from 'node:net';
import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXPORT_PATH } from '../../src/http/routes/export';
import { type BulkDispatcher, startBulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { messageRecord, ndjson, recordMessages, settle } from '../support/conversation-fixtures';
import { EXAMPLE, exampleFixture } from '../support/provisioning';
import { OTHER, SHOP, sendsFixture, waitUntil } from '../support/sends';
import { createTestApp } from '../support/services';

// Review 15c, the contract as a client reads it: every documented operation of /openapi.json is called over real
// HTTP (its successes and its errors), and every answer is checked against what the document gives for that route
// and status: the status is documented, the JSON body validates against its schema (ajv, OpenAPI 3.0 `nullable`),
// the documented headers carry values of their documented types. Routes the app registers and routes the document
// lists are the same set. A route, status or field that drifts from the document fails here.

type Schema = Record<string, unknown>;
type Response = { description: string; headers?: Record<string, { schema: Schema }>; content?: Record<string, { schema: Schema }> };
type Operation = { responses: Record<string, Response>; parameters?: Array<{ in: string; name: string }> };
type Doc = { paths: Record<string, Record<string, Operation>> };
type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

interface Answer {
  method: Method;
  template: string;
  url: string;
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** Routes the app serves that the document leaves out on purpose: no API key, not the public API. */
const UNDOCUMENTED = new Set([
  'GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /openapi.json', 'GET /webhooks/provider', 'POST /webhooks/provider',
]);

/** The spec's endpoints (api-v1.md, "Endpoints"), written as it writes them: a trailing slash on all but the export. */
const SPEC_ENDPOINTS = [
  'GET /api/v1/qualitative-export/messages', 'GET /api/v1/business-accounts/', 'POST /api/v1/platform-templates/send/',
  'POST /api/v1/platform-templates/send-bulk/', 'GET /api/v1/platform-templates/bulk-sends/',
  'GET /api/v1/platform-templates/bulk-sends/{bulk_send_id}/', 'GET /api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/',
  'GET /api/v1/platform-templates/messages/{message_id}/', 'GET /api/v1/contact-lookup/', 'GET /api/v1/external/contacts/',
  'POST /api/v1/external/contacts/upsert/', 'GET /api/v1/business-info/', 'GET /api/v1/business-hours/', 'GET /api/v1/holidays/',
];

/** Documented answers no walk here provokes, each with the reason (others are in their own suites). */
const NOT_WALKED = new Set([
  'POST /api/v1/platform-templates/send/ 409', // a keyed send in flight: test/api/idempotency.test.ts
  'POST /api/v1/platform-templates/send/ 502', // the provider unreachable: test/api/sends.test.ts
  'POST /api/v1/platform-templates/send/ 503', // the provider's outcome unknown: test/integration
  'POST /api/v1/platform-templates/send-bulk/ 409',
  'POST /api/v1/platform-templates/bulk-sends/{bulk_send_id}/cancel/ 422',
  'POST /api/v1/external/contacts/upsert/ 409', // two contacts of one number: test/api/contacts-upsert.test.ts
  'GET /api/v1/external/contacts/ 409',
  'POST /api/v1/webhook-endpoints/{id}/rotate-secret/ 409', 'POST /api/v1/webhook-endpoints/{id}/rotate-secret/ 422',
  'POST /api/v1/webhook-endpoints/{id}/deliveries/{delivery_id}/retry/ 409', 'POST /api/v1/webhook-endpoints/{id}/deliveries/{delivery_id}/retry/ 422',
  'POST /api/v1/webhook-endpoints/{id}/recover/ 409', 'POST /api/v1/webhook-endpoints/{id}/recover/ 422',
  'POST /api/v1/webhook-endpoints/{id}/test/ 409', 'POST /api/v1/webhook-endpoints/{id}/test/ 422',
  'POST /api/v1/webhook-endpoints/ 409', // in-flight or over the endpoint limit: webhook-endpoint-limit.test.ts
  'POST /api/v1/external/contacts/upsert/ 409',
  'GET /api/v1/business-info/ 404', 'GET /api/v1/business-accounts/ 404', // a key whose company has no read model yet
]);

/**
 * The refusals every route shares (src/http/shared-refusal-docs.ts), walked on a sample of routes above: 413 and 415
 * before a route runs; 503 during a graceful stop (test/e2e/shutdown-*) or when a write's read models lag
 * (projection-rebuild-gaps-read-models-behind.test.ts); a write's 500 whose outcome is unknown when the database failed
 * once its handler ran (review16c-database-unavailable.test.ts, openapi-outcome-unknown.test.ts).
 */
const SHARED_REFUSAL = / (413|415|503)$|^(POST|PATCH|DELETE) .* 500$/;

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
const compiled = new Map<string, ValidateFunction>();
const validatorOf = (id: string, schema: Schema) => {
  let v = compiled.get(id);
  if (!v) compiled.set(id, (v = ajv.compile(schema)));
  return v;
};

/** What is wrong with an answer, as the document reads it (empty: nothing). */
export function problemsOf(doc: Doc, a: Answer): string[] {
  const at = `${a.method} ${a.template} ${a.status} (${a.url})`;
  const op = doc.paths[a.template]?.[a.method.toLowerCase()];
  if (!op) return [`${at}: the operation is not documented`];
  const documented = op.responses[String(a.status)];
  if (!documented) return [`${at}: status not documented (documented: ${Object.keys(op.responses).join(', ')}); body ${a.text.slice(0, 200)}`];
  const problems: string[] = [];
  for (const [name, header] of Object.entries(documented.headers ?? {})) {
    const value = a.headers.get(name);
    if (value === null) continue;
    const typed = header.schema.type === 'integer' ? (/^\d+$/.test(value) ? Number(value) : value) : value;
    const check = validatorOf(JSON.stringify(header.schema), header.schema);
    if (!check(typed)) problems.push(`${at}: header ${name}: ${JSON.stringify(value)} is not ${JSON.stringify(header.schema)}`);
  }
  const contentType = (a.headers.get('content-type') ?? '').split(';')[0].trim();
  if (a.text === '') {
    if (documented.content && a.method !== 'DELETE') problems.push(`${at}: empty body, documented ${Object.keys(documented.content).join(', ')}`);
    return problems;
  }
  const content = documented.content?.[contentType];
  if (!content) {
    problems.push(`${at}: content type ${contentType} not documented (documented: ${Object.keys(documented.content ?? {}).join(', ') || 'none'})`);
    return problems;
  }
  if (contentType === 'application/json') {
    const check = validatorOf(`${a.method} ${a.template} ${a.status}`, content.schema);
    if (!check(a.json)) problems.push(`${at}: body ${a.text.slice(0, 300)} fails the schema: ${ajv.errorsText(check.errors)}`);
  }
  return problems;
}

/** The app's routes (method and path) from fastify's own route tree. */
export function registeredRoutes(tree: string): string[] {
  const routes: string[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:[│ ] {3})*)(?:├── |└── )?(\S.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1].length / 4 + (line.includes('── ') ? 1 : 0);
    stack.length = depth;
    const path = (stack[depth - 1] ?? '') + m[2];
    stack[depth] = path;
    for (const method of (m[3] ?? '').split(',').map((s) => s.trim()).filter(Boolean)) routes.push(`${method} ${path}`);
  }
  return routes;
}

const toTemplate = (path: string) => path.replace(/:([a-z_]+)/g, '{$1}');

describe('review 15c: every documented route answers as /openapi.json says, over real HTTP', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let dispatcher: BulkDispatcher | undefined;
  let limited: Awaited<ReturnType<typeof createTestApp>>;
  let base: string;
  let limitedBase: string;
  let doc: Doc;
  const answers: Answer[] = [];

  async function call(method: Method, template: string, options: {
    params?: Record<string, string>; query?: string; body?: unknown; raw?: string; key?: string | null; headers?: Record<string, string>; at?: string;
  } = {}): Promise<Answer> {
    const path = template.replace(/\{([a-z_]+)\}/g, (_, name: string) => encodeURIComponent(options.params?.[name] ?? ''));
    const url = `${options.at ?? base}${path}${options.query ? `?${options.query}` : ''}`;
    const headers: Record<string, string> = { ...options.headers };
    const key = options.key === undefined ? SHOP.key : options.key;
    if (key !== null) headers['x-api-key'] = key;
    let body: string | undefined;
    if (options.raw !== undefined || options.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = options.raw ?? JSON.stringify(options.body);
    }
    const res = await fetch(url, { method, headers, body });
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    const answer = { method, template, url, status: res.status, headers: res.headers, text, json };
    answers.push(answer);
    return answer;
  }

  beforeAll(async () => {
    const env = { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' };
    t = await createTestApp({ env });
    dispatcher = startBulkDispatcher(t.services);
    await seedFixture(t.services, exampleFixture({ keepContacts: true }), { actor: 'test' });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    limited = await createTestApp({ env: { ...env, RATE_LIMIT_PER_MINUTE: '2' } });
    await seedFixture(limited.services, sendsFixture(), { actor: 'test' });
    await limited.app.listen({ host: '127.0.0.1', port: 0 });
    limitedBase = `http://127.0.0.1:${(limited.app.server.address() as AddressInfo).port}`;
    doc = (await (await fetch(`${base}/openapi.json`)).json()) as Doc;
  }, 120_000);
  afterAll(async () => {
    await dispatcher?.stop();
    await t?.close();
    await limited?.close();
  });

  it('documents every route the app serves under /api/, and serves every documented one (method and path as written)', () => {
    const served = registeredRoutes(t.app.printRoutes({ commonPrefix: false }))
      .filter((r) => !r.startsWith('HEAD ') && !r.includes(' /docs'))
      .map((r) => { const [m, p] = r.split(' '); return `${m} ${toTemplate(p)}`; })
      .filter((r) => !UNDOCUMENTED.has(r));
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
    expect([...new Set(served)].sort()).toEqual(documented.sort());
    expect(documented.length).toBeGreaterThanOrEqual(25);
    expect(SPEC_ENDPOINTS.filter((e) => !documented.includes(e))).toEqual([]);
    // the other spelling of each (slash added or dropped) is no route (the not-found handler: 404 {error})
    for (const endpoint of SPEC_ENDPOINTS) {
      const [method, path] = endpoint.split(' ');
      const other = path.endsWith('/') ? path.slice(0, -1) : `${path}/`;
      expect(t.app.hasRoute({ method: method as Method, url: other.replace(/\{([a-z_]+)\}/g, ':$1') })).toBe(false);
    }
  });

  it('business data, accounts and contacts', async () => {
    for (const path of ['/api/v1/business-info/', '/api/v1/business-hours/', '/api/v1/holidays/', '/api/v1/business-accounts/']) {
      expect((await call('GET', path, { key: EXAMPLE.key })).status).toBe(200);
      expect((await call('GET', path, { key: null })).status).toBe(401);
      expect((await call('GET', path, { key: EXAMPLE.expiredKey })).status).toBe(401);
      expect((await call('GET', path, { key: EXAMPLE.globalKey })).status).toBe(403);
    }
    expect((await call('GET', '/api/v1/holidays/', { key: EXAMPLE.key, query: 'from=2026-01-01&to=2026-12-31' })).status).toBe(200);
    expect((await call('GET', '/api/v1/holidays/', { key: EXAMPLE.key, query: 'from=01/02/2026' })).status).toBe(400);
    const contact = exampleFixture({ keepContacts: true }).companies[0].contacts[0];
    for (const path of ['/api/v1/contact-lookup/', '/api/v1/external/contacts/']) {
      expect((await call('GET', path, { key: EXAMPLE.key, query: `phone=${encodeURIComponent(contact.phone)}` })).json.found).toBe(true);
      expect((await call('GET', path, { key: EXAMPLE.key, query: 'phone=%2B14155550000' })).json.found).toBe(false);
      expect((await call('GET', path, { key: EXAMPLE.key })).status).toBe(400);
      expect((await call('GET', path, { key: null, query: 'phone=1' })).status).toBe(401);
    }
    expect((await call('GET', '/api/v1/contact-lookup/', { key: EXAMPLE.globalKey, query: 'phone=1' })).status).toBe(403);
    expect((await call('GET', '/api/v1/external/contacts/', { key: EXAMPLE.globalKey, query: 'phone=1' })).status).toBe(401);

    const upsert = '/api/v1/external/contacts/upsert/';
    const field = { key: 'plan', value: ['gold'], expires_at: '2030-01-01T00:00:00Z' };
    const created = await call('POST', upsert, { key: EXAMPLE.key, body: { phone: '+5491155550999', full_name: 'Walk', custom_fields: [field] }, headers: { 'idempotency-key': 'walk-upsert' } });
    expect(created.status).toBe(201);
    const replay = await call('POST', upsert, { key: EXAMPLE.key, body: { phone: '+5491155550999', full_name: 'Walk', custom_fields: [field] }, headers: { 'idempotency-key': 'walk-upsert' } });
    expect([replay.status, replay.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    expect((await call('POST', upsert, { key: EXAMPLE.key, body: { phone: '+5491155550999', email: 'walk@example.com' } })).status).toBe(200);
    expect((await call('POST', upsert, { key: EXAMPLE.key, body: { phone: '+5491155550999' }, headers: { 'idempotency-key': 'walk-upsert' } })).status).toBe(422);
    expect((await call('POST', upsert, { key: EXAMPLE.key, body: { phone: 'nope' } })).status).toBe(400);
    expect((await call('POST', upsert, { key: EXAMPLE.key, body: { phone: '+5491155550999' }, headers: { 'idempotency-key': ' ' } })).status).toBe(400);
    expect((await call('POST', upsert, { key: EXAMPLE.globalKey, body: { phone: '+5491155550999' } })).status).toBe(401);
    expect((await call('POST', upsert, { key: null, body: { phone: '+5491155550999' } })).status).toBe(401);
  });

  it('single sends and their status records', async () => {
    const send = '/api/v1/platform-templates/send/';
    const body = { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155550101' };
    const sent = await call('POST', send, { body, headers: { 'idempotency-key': 'walk-send' } });
    expect(sent.status).toBe(200);
    expect((await call('POST', send, { body, headers: { 'idempotency-key': 'walk-send' } })).headers.get('idempotent-replayed')).toBe('true');
    expect((await call('POST', send, { body: { ...body, recipient_phone: '+5491155550102' }, headers: { 'idempotency-key': 'walk-send' } })).status).toBe(422);
    expect((await call('POST', send, { body: {} })).status).toBe(400);
    expect((await call('POST', send, { body: { ...body, template_name: 'promo' } })).status).toBe(400);
    expect((await call('POST', send, { body: { ...body, template_name: 'nope' } })).status).toBe(404);
    expect((await call('POST', send, { body, key: null })).status).toBe(401);
    expect((await call('POST', send, { body, key: EXAMPLE.globalKey })).status).toBe(403);
    expect((await call('POST', send, { raw: '{"phone_number_id":' })).status).toBe(400);
    expect((await call('POST', send, { body, headers: { 'idempotency-key': ' ' } })).status).toBe(400);

    const status = '/api/v1/platform-templates/messages/{message_id}/';
    expect((await call('GET', status, { params: { message_id: sent.json.message_id } })).status).toBe(200);
    expect((await call('GET', status, { params: { message_id: 'wamid.unknown' } })).status).toBe(404);
    expect((await call('GET', status, { params: { message_id: sent.json.message_id }, key: OTHER.key })).status).toBe(403);
    expect((await call('GET', status, { params: { message_id: sent.json.message_id }, key: null })).status).toBe(401);
    expect((await call('GET', status, { params: { message_id: sent.json.message_id }, key: EXAMPLE.globalKey })).status).toBe(403);
  });

  it('bulk sends: create, list with its links, detail, messages, cancel', async () => {
    const create = '/api/v1/platform-templates/send-bulk/';
    const body = (phones: string[], number = SHOP.number.phoneNumberId) => ({
      phone_number_id: number, template_name: 'welcome', recipients: phones.map((phone) => ({ phone })),
    });
    const first = await call('POST', create, { body: body(['+5491155550201', '+5491155550202']), headers: { 'idempotency-key': 'walk-bulk' } });
    expect(first.status).toBe(202);
    expect((await call('POST', create, { body: body(['+5491155550201', '+5491155550202']), headers: { 'idempotency-key': 'walk-bulk' } })).headers.get('idempotent-replayed')).toBe('true');
    expect((await call('POST', create, { body: body(['+5491155550203']), headers: { 'idempotency-key': 'walk-bulk' } })).status).toBe(422);
    const paced = await call('POST', create, { body: body(['+5491155550301', '+5491155550302', '+5491155550303'], SHOP.smallNumber.phoneNumberId) });
    expect(paced.status).toBe(202);
    expect((await call('POST', create, { body: { ...body([]), recipients: [] } })).status).toBe(400);
    expect((await call('POST', create, { body: {} })).status).toBe(400);
    expect((await call('POST', create, { body: body(['+5491155550201'], '999999') })).status).toBe(404);
    expect((await call('POST', create, { body: body(['+5491155550201']), key: null })).status).toBe(401);
    expect((await call('POST', create, { body: body(['+5491155550201']), key: EXAMPLE.globalKey })).status).toBe(403);

    const list = '/api/v1/platform-templates/bulk-sends/';
    const page1 = await call('GET', list, { query: 'page_size=1' });
    expect(page1.json.next).not.toBeNull();
    const page2 = await fetch(page1.json.next, { headers: { 'x-api-key': SHOP.key } });
    answers.push({ method: 'GET', template: list, url: page1.json.next, status: page2.status, headers: page2.headers, text: await page2.clone().text(), json: await page2.json() });
    expect(answers[answers.length - 1].json.previous).not.toBeNull();
    expect((await call('GET', list, { query: 'status=NOPE' })).status).toBe(400);
    expect((await call('GET', list, { query: 'page=99' })).status).toBe(404);
    expect((await call('GET', list, { key: null })).status).toBe(401);
    expect((await call('GET', list, { key: EXAMPLE.globalKey })).status).toBe(403);

    const id = first.json.bulk_send_id;
    for (const path of ['/api/v1/platform-templates/bulk-sends/{bulk_send_id}/', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/']) {
      expect((await call('GET', path, { params: { bulk_send_id: id } })).status).toBe(200);
      expect((await call('GET', path, { params: { bulk_send_id: 'not-a-uuid' } })).status).toBe(400);
      expect((await call('GET', path, { params: { bulk_send_id: '00000000-0000-4000-8000-000000000000' } })).status).toBe(404);
      expect((await call('GET', path, { params: { bulk_send_id: id }, key: null })).status).toBe(401);
      expect((await call('GET', path, { params: { bulk_send_id: id }, key: EXAMPLE.globalKey })).status).toBe(403);
    }
    await waitUntil(async () => (await call('GET', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/', { params: { bulk_send_id: id } })).json.count > 0);
    expect((await call('GET', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/', { params: { bulk_send_id: id }, query: 'status=bogus' })).status).toBe(400);

    const cancel = '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/cancel/';
    expect((await call('POST', cancel, { params: { bulk_send_id: paced.json.bulk_send_id }, headers: { 'idempotency-key': 'walk-cancel' } })).status).toBe(200);
    expect((await call('POST', cancel, { params: { bulk_send_id: paced.json.bulk_send_id }, headers: { 'idempotency-key': 'walk-cancel' } })).headers.get('idempotent-replayed')).toBe('true');
    expect((await call('POST', cancel, { params: { bulk_send_id: paced.json.bulk_send_id } })).status).toBe(409);
    expect((await call('POST', cancel, { params: { bulk_send_id: '00000000-0000-4000-8000-000000000000' } })).status).toBe(404);
    expect((await call('POST', cancel, { params: { bulk_send_id: 'x' } })).status).toBe(400);
    expect((await call('POST', cancel, { params: { bulk_send_id: id }, key: null })).status).toBe(401);
    expect((await call('POST', cancel, { params: { bulk_send_id: id }, key: EXAMPLE.globalKey })).status).toBe(403);
  });

  it('the export: NDJSON and its documented errors', async () => {
    await recordMessages(t.services, [1, 2, 3].map((n) => messageRecord({ companyId: EXAMPLE.companyId, occurredAt: `2026-01-0${n}T10:00:00.000Z` })));
    await settle(t.services);
    const q = (company: number) => `company_id=${company}&from=2026-01-01&to=2026-01-31`;
    const ok = await call('GET', EXPORT_PATH, { key: EXAMPLE.key, query: `${q(EXAMPLE.companyId)}&limit=2` });
    expect([ok.status, ndjson(ok.text).length, ndjson(ok.text)[2]._truncated]).toEqual([200, 3, true]);
    expect((await call('GET', EXPORT_PATH, { key: EXAMPLE.globalKey, query: q(EXAMPLE.companyId) })).status).toBe(200);
    expect((await call('GET', EXPORT_PATH, { key: EXAMPLE.key, query: 'company_id=101&from=2026-02-01&to=2026-01-01' })).status).toBe(400);
    expect((await call('GET', EXPORT_PATH, { key: null, query: q(EXAMPLE.companyId) })).status).toBe(401);
    expect((await call('GET', EXPORT_PATH, { key: EXAMPLE.key, query: q(SHOP.companyId) })).status).toBe(403);
  });

  it('webhook endpoints: every action, its successes and refusals', async () => {
    const BASE = '/api/v1/webhook-endpoints/';
    const one = `${BASE}{id}/`;
    const created = await call('POST', BASE, { body: { url: `${base}/nowhere`, event_types: ['message.sent'] }, headers: { 'idempotency-key': 'walk-endpoint' } });
    expect(created.status).toBe(201);
    const id = created.json.id;
    expect((await call('POST', BASE, { body: { url: `${base}/nowhere`, event_types: ['message.sent'] }, headers: { 'idempotency-key': 'walk-endpoint' } })).headers.get('idempotent-replayed')).toBe('true');
    expect((await call('POST', BASE, { body: { url: `${base}/other`, event_types: ['message.sent'] }, headers: { 'idempotency-key': 'walk-endpoint' } })).status).toBe(422);
    expect((await call('POST', BASE, { body: { url: 'x' } })).status).toBe(400);
    expect((await call('POST', BASE, { body: {}, key: null })).status).toBe(401);
    expect((await call('POST', BASE, { body: { url: `${base}/nowhere`, event_types: ['message.sent'] }, key: EXAMPLE.globalKey })).status).toBe(403);
    expect((await call('GET', BASE)).status).toBe(200);
    expect((await call('GET', BASE, { key: null })).status).toBe(401);
    expect((await call('GET', BASE, { key: EXAMPLE.globalKey })).status).toBe(403);
    expect((await call('GET', one, { params: { id } })).status).toBe(200);
    expect((await call('GET', one, { params: { id: 'nope' } })).status).toBe(404);
    expect((await call('GET', one, { params: { id }, key: null })).status).toBe(401);
    expect((await call('PATCH', one, { params: { id }, body: { description: 'walked' } })).status).toBe(200);
    expect((await call('PATCH', one, { params: { id }, body: { enabled: 'yes' } })).status).toBe(400);
    expect((await call('PATCH', one, { params: { id: 'nope' }, body: {} })).status).toBe(404);
    expect((await call('PATCH', one, { params: { id }, body: {}, key: null })).status).toBe(401);
    const action = (what: string) => `${BASE}{id}/${what}/`;
    expect((await call('POST', action('rotate-secret'), { params: { id } })).status).toBe(200);
    expect((await call('POST', action('rotate-secret'), { params: { id: 'nope' } })).status).toBe(404);
    expect((await call('POST', action('rotate-secret'), { params: { id }, headers: { 'idempotency-key': '' } })).status).toBe(400);
    expect((await call('POST', action('rotate-secret'), { params: { id }, key: null })).status).toBe(401);
    const test = await call('POST', action('test'), { params: { id } });
    expect(test.status).toBe(202);
    expect((await call('POST', action('test'), { params: { id: 'nope' } })).status).toBe(404);
    expect((await call('POST', action('test'), { params: { id }, headers: { 'idempotency-key': '' } })).status).toBe(400);
    expect((await call('POST', action('test'), { params: { id }, key: null })).status).toBe(401);
    const deliveries = action('deliveries');
    expect((await call('GET', deliveries, { params: { id } })).status).toBe(200);
    expect((await call('GET', deliveries, { params: { id }, query: 'page_size=0' })).status).toBe(400);
    expect((await call('GET', deliveries, { params: { id: 'nope' } })).status).toBe(404);
    expect((await call('GET', deliveries, { params: { id }, key: null })).status).toBe(401);
    const retry = `${BASE}{id}/deliveries/{delivery_id}/retry/`;
    // queued and not yet attempted (no sender runs here): 202 or 404 as the delivery's state allows; validated below
    await call('POST', retry, { params: { id, delivery_id: test.json.delivery_id } });
    expect((await call('POST', retry, { params: { id, delivery_id: 'nope' } })).status).toBe(404);
    expect((await call('POST', retry, { params: { id, delivery_id: test.json.delivery_id }, headers: { 'idempotency-key': '' } })).status).toBe(400);
    expect((await call('POST', retry, { params: { id, delivery_id: test.json.delivery_id }, key: null })).status).toBe(401);
    expect((await call('POST', action('recover'), { params: { id }, body: { since: '2026-01-01T00:00:00Z' } })).status).toBe(202);
    expect((await call('POST', action('recover'), { params: { id }, body: { since: 'yesterday' } })).status).toBe(400);
    expect((await call('POST', action('recover'), { params: { id: 'nope' }, body: { since: '2026-01-01T00:00:00Z' } })).status).toBe(404);
    expect((await call('POST', action('recover'), { params: { id }, body: {}, key: null })).status).toBe(401);
    expect((await call('DELETE', one, { params: { id } })).status).toBe(204);
    expect((await call('DELETE', one, { params: { id } })).status).toBe(404);
    expect((await call('DELETE', one, { params: { id }, key: null })).status).toBe(401);
  });

  it('the rate limit: every documented operation answers its documented 429 with Retry-After and RateLimit-*', async () => {
    await call('GET', '/api/v1/business-accounts/', { at: limitedBase });
    await call('GET', '/api/v1/business-accounts/', { at: limitedBase });
    const some = '00000000-0000-4000-8000-000000000000';
    for (const [template, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops)) {
        const answer = await call(method.toUpperCase() as Method, template, {
          at: limitedBase, params: { bulk_send_id: some, id: some, delivery_id: some, message_id: 'm' }, body: method === 'get' ? undefined : {},
          query: template === EXPORT_PATH ? `company_id=${SHOP.companyId}&from=2026-01-01&to=2026-01-02` : undefined,
        });
        expect({ at: `${method} ${template}`, status: answer.status }).toEqual({ at: `${method} ${template}`, status: 429 });
        const headers = ['retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'].map((h) => [h, answer.headers.get(h) !== null]);
        expect({ at: `${method} ${template}`, headers }).toEqual({ at: `${method} ${template}`, headers: headers.map(([h]) => [h, true]) });
      }
    }
  });

  it('the refusals every route shares (src/http/shared-refusal-docs.ts): 413 and 415 on routes that take a body', async () => {
    const send = '/api/v1/platform-templates/send/';
    const upsert = '/api/v1/external/contacts/upsert/';
    const patch = '/api/v1/webhook-endpoints/{id}/';
    const some = '00000000-0000-4000-8000-000000000000';
    expect((await call('POST', send, { raw: JSON.stringify({ pad: 'x'.repeat(1_100_000) }) })).status).toBe(413);
    expect((await call('POST', send, { raw: '<send/>', headers: { 'content-type': 'application/xml' } })).status).toBe(415);
    expect((await call('POST', upsert, { key: EXAMPLE.key, raw: '{}', headers: { 'content-encoding': 'gzip' } })).status).toBe(415);
    expect((await call('POST', upsert, { key: EXAMPLE.key, raw: JSON.stringify({ pad: 'x'.repeat(1_100_000) }) })).status).toBe(413);
    expect((await call('PATCH', patch, { params: { id: some }, raw: '<x/>', headers: { 'content-type': 'application/xml' } })).status).toBe(415);
  });

  it('every answer above is documented for its route and status, and validates against the document', () => {
    expect(answers.flatMap((a) => problemsOf(doc, a))).toEqual([]);
  });

  it('the check finds drift: an undocumented field, a field of another type, a missing one, an undocumented status', () => {
    const info = answers.find((a) => a.template === '/api/v1/business-info/' && a.status === 200)!;
    const drifted = (json: unknown, status = 200) => problemsOf(doc, { ...info, status, json, text: JSON.stringify(json) });
    expect(drifted(info.json)).toEqual([]);
    expect(drifted({ ...info.json, extra: 1 })).toEqual([expect.stringContaining('must NOT have additional properties')]);
    expect(drifted({ ...info.json, id: String(info.json.id) })).toEqual([expect.stringContaining('must be integer')]);
    const { companySize: _dropped, ...withoutSize } = info.json;
    expect(drifted(withoutSize)).toEqual([expect.stringContaining("must have required property 'companySize'")]);
    expect(drifted({ error: 'x' }, 418)).toEqual([expect.stringContaining('status not documented')]);
  });

  it('every documented answer was walked (or is named, with the suite that provokes it)', () => {
    const walked = new Set(answers.map((a) => `${a.method} ${a.template} ${a.status}`));
    const missing = Object.entries(doc.paths).flatMap(([p, ops]) => Object.entries(ops).flatMap(([m, op]) =>
      Object.keys(op.responses).map((s) => `${m.toUpperCase()} ${p} ${s}`))).filter((k) => !walked.has(k) && !NOT_WALKED.has(k) && !SHARED_REFUSAL.test(k));
    expect(missing).toEqual([]);
  });
});
