import { z } from 'zod';
import { buildApp } from '../../src/http/app';
import { buildOpsApp } from '../../src/http/ops-app';
import { ApiError, detailNotFound, fieldErrors } from '../../src/http/errors';
import { createTestContext, type TestContext } from '../support/services';

describe('ops endpoints and error mapping', () => {
  let ctx: TestContext;
  let app: Awaited<ReturnType<typeof buildApp>>;

  beforeAll(async () => {
    ctx = await createTestContext();
    app = await buildApp(ctx.services);
    // Routes of each error family, to exercise the one root error handler.
    app.get('/t/plain', { schema: { querystring: z.object({ n: z.coerce.number().int() }) } }, async () => ({ ok: true }));
    app.get('/t/export', { config: { errorShape: 'export' }, schema: { querystring: z.object({ from: z.iso.datetime() }) } }, async () => ({ ok: true }));
    app.post('/t/fields', { config: { errorShape: 'fields' }, schema: { body: z.object({ phone_number_id: z.string(), template_name: z.string() }) } }, async () => ({ ok: true }));
    app.get('/t/detail', async () => { throw detailNotFound('Not found.'); });
    app.get('/t/boom', async () => { throw new Error('secret internal detail'); });
    app.get('/t/export-boom', { config: { errorShape: 'export' } }, async () => { throw new Error('secret internal detail'); });
    app.get('/t/conflict', async () => { throw new ApiError(409, 'more than one contact has this number'); });
    app.post('/t/fields-manual', { config: { errorShape: 'fields' } }, async () => { throw fieldErrors({ recipient_phone: ['must start with + and contain only digits'] }); });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await ctx.close();
  });

  it('GET /healthz answers 200', async () => {
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz checks the database and the event store (Kafka only when configured)', async () => {
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ready', checks: { database: 'ok', eventStore: 'ok' } });
  });

  it('GET /readyz answers 503 once a stop has begun (serve and the worker ops listener alike); the rest still answers', async () => {
    const ops = await buildOpsApp(ctx.services);
    try {
      for (const a of [app, ops]) {
        a.readiness.stopping = true;
        const res = await a.inject({ method: 'GET', url: '/readyz' });
        expect(res.statusCode).toBe(503);
        expect(res.json()).toEqual({ status: 'not ready', checks: { server: 'stopping' } });
        expect((await a.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      }
    } finally {
      app.readiness.stopping = false;
      await ops.close();
    }
  });

  it('GET /metrics exposes Prometheus metrics including request durations', async () => {
    await app.inject({ method: 'GET', url: '/healthz' });
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    expect(res.body).toContain('switchboard_http_request_duration_seconds_bucket');
    expect(res.body).toContain('route="/healthz"');
    expect(res.body).toContain('process_resident_memory_bytes');
  });

  it('GET /metrics reads the event store\'s group commit of stream creations', async () => {
    const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    const value = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(body)?.[1]);
    const batches = value('switchboard_event_store_creation_batches_total');
    const creations = value('switchboard_event_store_creations_total');
    expect(Number.isInteger(batches)).toBe(true);
    expect(creations).toBeGreaterThanOrEqual(batches);
  });

  it('GET /openapi.json is generated from the route schemas; /docs serves the reference page', async () => {
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.components.securitySchemes.apiKey).toEqual({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(doc.paths['/t/plain'].get.parameters[0]).toMatchObject({ name: 'n', in: 'query', required: true });
    expect(doc.paths['/healthz']).toBeUndefined();
    const docs = await app.inject({ method: 'GET', url: '/docs/' });
    expect(docs.statusCode).toBe(200);
    expect(docs.headers['content-type']).toContain('text/html');
  });

  it('maps validation errors to each family\'s body shape', async () => {
    const plain = await app.inject({ method: 'GET', url: '/t/plain?n=abc' });
    expect(plain.statusCode).toBe(400);
    expect(plain.json()).toEqual({ error: expect.stringMatching(/^n: /) });

    const exp = await app.inject({ method: 'GET', url: '/t/export?from=yesterday' });
    expect(exp.statusCode).toBe(400);
    expect(exp.json()).toEqual({ error: { code: 'INVALID_PARAMETER', message: expect.stringMatching(/^from: /) } });

    const fields = await app.inject({ method: 'POST', url: '/t/fields', payload: {} });
    expect(fields.statusCode).toBe(400);
    expect(Object.keys(fields.json()).sort()).toEqual(['phone_number_id', 'template_name']);
    expect(fields.json().phone_number_id).toEqual([expect.any(String)]);

    const manual = await app.inject({ method: 'POST', url: '/t/fields-manual', payload: {} });
    expect(manual.json()).toEqual({ recipient_phone: ['must start with + and contain only digits'] });

    const detail = await app.inject({ method: 'GET', url: '/t/detail' });
    expect(detail.statusCode).toBe(404);
    expect(detail.json()).toEqual({ detail: 'Not found.' });

    const conflict = await app.inject({ method: 'GET', url: '/t/conflict' });
    expect(conflict.statusCode).toBe(409);
    expect(conflict.json()).toEqual({ error: 'more than one contact has this number' });
  });

  it('rejects malformed JSON and oversized bodies with a 4xx in the route\'s shape', async () => {
    const bad = await app.inject({ method: 'POST', url: '/t/fields', headers: { 'content-type': 'application/json' }, payload: '{"a":' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'request body is not valid JSON' });
    const big = await app.inject({ method: 'POST', url: '/t/fields', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ x: 'a'.repeat(2 * 1024 * 1024) }) });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toEqual({ error: 'request body is too large' });
  });

  it('hides 5xx details from clients', async () => {
    const res = await app.inject({ method: 'GET', url: '/t/boom' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'internal server error' });
    expect(res.body).not.toContain('secret');
    const exp = await app.inject({ method: 'GET', url: '/t/export-boom' });
    expect(exp.json()).toEqual({ error: { code: 'INTERNAL_ERROR', message: 'internal server error' } });
  });

  it('answers unknown routes with 404 {error}', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/nothing-here/' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'no route for GET /api/v1/nothing-here/' });
  });
});
