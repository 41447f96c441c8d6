import { createTestApp } from '../support/services';

// A path that exists asked with a method it does not take: 405 with `Allow` (RFC 9110, 15.5.6), in the route's error
// shape; a path that does not exist: 404. Until 2026-11-28 both were 404 (a 'Noticed' item).
describe('405 Method Not Allowed', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it.each([
    ['DELETE', '/api/v1/platform-templates/send/', 'POST', { error: 'DELETE is not allowed on /api/v1/platform-templates/send/: it takes POST' }],
    ['PUT', '/api/v1/webhook-endpoints/00000000-0000-4000-8000-000000000000/', 'DELETE, GET, HEAD, PATCH',
      { error: 'PUT is not allowed on /api/v1/webhook-endpoints/00000000-0000-4000-8000-000000000000/: it takes DELETE, GET, HEAD, PATCH' }],
    ['GET', '/api/v1/platform-templates/send-bulk/', 'POST', { error: 'GET is not allowed on /api/v1/platform-templates/send-bulk/: it takes POST' }],
    ['POST', '/api/v1/qualitative-export/messages', 'GET, HEAD',
      { error: { code: 'METHOD_NOT_ALLOWED', message: 'POST is not allowed on /api/v1/qualitative-export/messages: it takes GET, HEAD' } }],
    ['POST', '/healthz', 'GET, HEAD', { error: 'POST is not allowed on /healthz: it takes GET, HEAD' }],
  ])('%s %s: 405, Allow: %s', async (method, url, allow, body) => {
    const res = await t.app.inject({ method: method as 'GET', url: `${url}?x=1`, headers: { 'content-type': 'application/json' }, payload: method === 'GET' ? undefined : '{}' });
    expect({ status: res.statusCode, allow: res.headers.allow, body: res.json() }).toEqual({ status: 405, allow, body });
  });

  it('a path that does not exist is still 404, whatever the method', async () => {
    for (const method of ['GET', 'POST', 'DELETE'] as const) {
      const res = await t.app.inject({ method, url: '/api/v1/platform-templates/sends/' });
      expect({ status: res.statusCode, allow: res.headers.allow, body: res.json() })
        .toEqual({ status: 404, allow: undefined, body: { error: `no route for ${method} /api/v1/platform-templates/sends/` } });
    }
    // a parameter is one segment: a longer path is not the route's
    const deeper = await t.app.inject({ method: 'PUT', url: '/api/v1/webhook-endpoints/a/b/c/' });
    expect(deeper.statusCode).toBe(404);
  });

  // review 17 (2026-11-28): a route that takes the method but finds nothing (the docs' static files) called the
  // not-found handler, which answered 405 naming that very method; the docs page's `/docs/` was known as `/docs` only
  it('a route that takes the method and finds nothing answers 404, not 405', async () => {
    for (const method of ['GET', 'HEAD'] as const) {
      const res = await t.app.inject({ method, url: '/docs/static/nothing-here.js' });
      expect({ status: res.statusCode, allow: res.headers.allow }).toEqual({ status: 404, allow: undefined });
    }
  });

  it('a prefixed page answers 405 with its methods with and without its trailing slash', async () => {
    for (const url of ['/docs', '/docs/']) {
      const res = await t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: '{}' });
      expect({ status: res.statusCode, allow: res.headers.allow }).toEqual({ status: 405, allow: 'GET, HEAD' });
    }
  });
});
