import { createTestApp } from '../support/services';

// Review of issue #16: the OpenAPI document describes every answer the Idempotency-Key and the rate limits add to
// a route, with their headers (docs/idempotency.md, docs/rate-limits.md, "OpenAPI").

type Operation = { responses: Record<string, { description: string; headers?: Record<string, unknown>; content?: Record<string, { schema: unknown }> }> };

const KEYED = [
  ['post', '/api/v1/platform-templates/send/'],
  ['post', '/api/v1/platform-templates/send-bulk/'],
  ['post', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/cancel/'],
  ['post', '/api/v1/external/contacts/upsert/'],
  ['post', '/api/v1/webhook-endpoints/'],
  ['post', '/api/v1/webhook-endpoints/{id}/rotate-secret/'],
  ['post', '/api/v1/webhook-endpoints/{id}/deliveries/{delivery_id}/retry/'],
  ['post', '/api/v1/webhook-endpoints/{id}/recover/'],
  ['post', '/api/v1/webhook-endpoints/{id}/test/'],
] as const;

const plainError = { type: 'object', properties: { error: { type: 'string' } }, required: ['error'] };
const schemaOf = (op: Operation, status: string) => op.responses[status]?.content?.['application/json']?.schema;

describe('issue #16 in the OpenAPI document', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let doc: { paths: Record<string, Record<string, Operation>> };

  beforeAll(async () => {
    t = await createTestApp();
    doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
  });
  afterAll(async () => {
    await t?.close();
  });

  it.each(KEYED)('%s %s documents the 400 of a malformed Idempotency-Key in the plain shape', (method, path) => {
    const op = doc.paths[path][method];
    expect(Object.keys(op.responses)).toContain('400');
    // the send's 400 is any JSON (field errors or plain); every other keyed route declares the plain shape among its 400s
    if (path !== '/api/v1/platform-templates/send/') expect(JSON.stringify(schemaOf(op, '400'))).toContain('"error":{"type":"string"}');
  });

  it.each(KEYED)('%s %s documents Retry-After on its 409 and the key in its 409 and 422', (method, path) => {
    const op = doc.paths[path][method];
    expect(op.responses['409'].headers).toMatchObject({ 'retry-after': { schema: { type: 'integer' } } });
    expect(op.responses['409'].description).toContain('Idempotency-Key');
    expect(op.responses['422'].description).toContain('Idempotency-Key');
  });

  it.each(KEYED)('%s %s documents Idempotent-Replayed on its success answers', (method, path) => {
    const op = doc.paths[path][method];
    const successes = Object.keys(op.responses).filter((s) => s.startsWith('2'));
    expect(successes.length).toBeGreaterThan(0);
    for (const status of successes) {
      expect({ status, headers: op.responses[status].headers }).toMatchObject({ status, headers: { 'idempotent-replayed': { schema: { type: 'string', enum: ['true'] } } } });
    }
  });

  it('every authenticated operation with declared answers documents the rate limit\'s 429, its headers and its error shape', () => {
    const checked: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      if (!path.startsWith('/api/v1/')) continue;
      for (const [method, op] of Object.entries(ops)) {
        checked.push(`${method} ${path}`);
        const limited = op.responses['429'];
        expect({ at: `${method} ${path}`, has429: limited !== undefined }).toEqual({ at: `${method} ${path}`, has429: true });
        expect(Object.keys(limited.headers ?? {}).sort()).toEqual(['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after']);
        // the export's own shape, {error: {code, message}} (it declares its answers since 2026-11-28); the others' {error}
        const export_ = path === '/api/v1/qualitative-export/messages';
        expect(JSON.stringify(schemaOf(op, '429'))).toContain(export_ ? '"code":{"type":"string"}' : '"error":{"type":"string"}');
      }
    }
    expect(checked.length).toBeGreaterThan(20);
    expect(schemaOf(doc.paths['/api/v1/external/contacts/upsert/'].post, '429')).toMatchObject(plainError);
  });
});
