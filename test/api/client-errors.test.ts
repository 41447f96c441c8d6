import { connect } from 'node:net';
import { PassThrough } from 'node:stream';
import { answerClientError } from '../../src/http/protocol-guards';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXAMPLE, countEvents, exampleFixture } from '../support/provisioning';
import { createTestApp } from '../support/services';

// Requests Node's HTTP parser refuses before any route runs (docs/reliability.md, "Limits"): over a real socket,
// since `inject` never goes through the parser. The answer is in the spec's plain {error} shape, then the
// connection closes.

type T = Awaited<ReturnType<typeof createTestApp>>;

describe('HTTP parser errors', () => {
  let t: T;
  let port = 0;

  beforeAll(async () => {
    t = await createTestApp();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Sends raw bytes and reads until the server closes the connection. */
  const exchange = (raw: string) => new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (answer += chunk));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });

  const parsed = (answer: string) => {
    const [head, body] = answer.split('\r\n\r\n');
    const [statusLine, ...headers] = head.split('\r\n');
    return { statusLine, headers: headers.map((h) => h.toLowerCase()), body: JSON.parse(body) };
  };

  it.each([
    ['a request line that is not HTTP', 'GARBAGE\r\n\r\n'],
    ['a header name with a space', 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n'],
    ['two different Content-Length headers', 'POST /api/v1/platform-templates/send/ HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'],
    ['a chunk size that is not hexadecimal', 'POST /api/v1/platform-templates/send/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n'],
  ])('%s: 400 {error}, connection closed', async (_what, raw) => {
    const answer = parsed(await exchange(raw));
    expect(answer.statusLine).toBe('HTTP/1.1 400 Bad Request');
    expect(answer.headers).toEqual(expect.arrayContaining(['content-type: application/json; charset=utf-8', 'connection: close']));
    expect(answer.body).toEqual({ error: 'the HTTP request is malformed' });
  });

  it('a bad chunk after the route already answered (401: no API key, checked first on every API route): that one answer, then the connection is closed', async () => {
    const answer = await exchange('PATCH /api/v1/webhook-endpoints/x/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\nzz\r\n');
    expect(answer.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    const only = parsed(answer);
    expect(only.statusLine).toBe('HTTP/1.1 401 Unauthorized');
    expect(only.body).toEqual({ error: expect.stringContaining('API key') });
  });

  it('an HTTP/1.1 request without Host: 400 {error} (Node answers it with an empty body)', async () => {
    const answer = parsed(await exchange('GET /api/v1/business-accounts/ HTTP/1.1\r\nConnection: close\r\n\r\n'));
    expect(answer.statusLine).toBe('HTTP/1.1 400 Bad Request');
    expect(answer.body).toEqual({ error: 'the Host header is required' });
    // HTTP/1.0 has no Host requirement: the request goes on to authentication
    expect(parsed(await exchange('GET /api/v1/business-accounts/ HTTP/1.0\r\n\r\n')).statusLine).toBe('HTTP/1.1 401 Unauthorized');
  });

  it('CONNECT: 405 {error}, connection closed (Node closes it without an answer)', async () => {
    const answer = parsed(await exchange('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
    expect(answer.statusLine).toBe('HTTP/1.1 405 Method Not Allowed');
    expect(answer.headers).toEqual(expect.arrayContaining(['connection: close']));
    expect(answer.body).toEqual({ error: 'the CONNECT method is not supported' });
  });

  it('headers over the size limit: 431 {error}', async () => {
    const answer = parsed(await exchange(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
    expect(answer.statusLine).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(answer.body).toEqual({ error: 'the request headers are too large' });
  });

  it('an Expect other than 100-continue: 417 {error}', async () => {
    const answer = parsed(await exchange('POST /api/v1/external/contacts/upsert/ HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'));
    expect(answer.statusLine).toBe('HTTP/1.1 417 Expectation Failed');
    expect(answer.body).toEqual({ error: "Expect 'teapot' is not supported" });
  });

  it('a well-formed request on the same server is answered as usual', async () => {
    const answer = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });
});

describe('answerClientError', () => {
  const socketCapturing = () => {
    const socket = new PassThrough();
    let written = '';
    socket.on('data', (chunk) => (written += chunk));
    socket.on('error', () => undefined);
    return { socket, written: () => written };
  };

  it('a request not received in time: 408 {error}', async () => {
    const { socket, written } = socketCapturing();
    answerClientError(Object.assign(new Error('timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), socket);
    await new Promise((r) => setImmediate(r));
    expect(written()).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*\r\n\r\n\{"error":"the request was not received in time"\}$/);
    expect(socket.destroyed).toBe(true);
  });

  it('a connection the client reset: nothing written', async () => {
    const { socket, written } = socketCapturing();
    answerClientError(Object.assign(new Error('reset'), { code: 'ECONNRESET' }), socket);
    await new Promise((r) => setImmediate(r));
    expect(written()).toBe('');
  });
});

describe('compressed request bodies', () => {
  let t: T;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it.each([
    ['/api/v1/external/contacts/upsert/', 'gzip'],
    ['/api/v1/platform-templates/send/', 'br'],
    ['/api/v1/platform-templates/send-bulk/', 'deflate, gzip'],
  ])('POST %s with Content-Encoding %s: 415 {error}, nothing done', async (url, coding) => {
    const before = await countEvents(t.db.pool);
    const res = await t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', 'content-encoding': coding, 'x-api-key': EXAMPLE.key }, payload: '{}' });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toEqual({ error: `Content-Encoding '${coding}' is not supported: send the body uncompressed` });
    expect(await countEvents(t.db.pool)).toBe(before);
  });

  it('identity, or a request without a body, is read as usual', async () => {
    const identity = await t.app.inject({
      method: 'POST', url: '/api/v1/external/contacts/upsert/', headers: { 'content-type': 'application/json', 'content-encoding': 'identity' }, payload: '{}',
    });
    expect(identity.statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'content-encoding': 'gzip' } })).statusCode).toBe(200);
  });
});

describe('request bodies that are not JSON', () => {
  let t: T;
  beforeAll(async () => {
    t = await createTestApp();
    await seedFixture(t.services, exampleFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  // Until 2026-11-28 fastify's own text/plain parser read a text/plain body as a string, and the route answered 400
  // ("expected object"), while any other type that is not JSON got 415 (a 'Noticed' item).
  it.each([
    ['/api/v1/external/contacts/upsert/', 'text/plain', '{"phone":"+5491155550000"}'],
    ['/api/v1/platform-templates/send/', 'text/plain; charset=utf-8', '{}'],
    ['/api/v1/platform-templates/send-bulk/', 'application/xml', '<bulk/>'],
    ['/api/v1/platform-templates/send/', 'application/x-www-form-urlencoded', 'a=1'],
  ])('POST %s with Content-Type %s: 415 in the route\'s shape, nothing done', async (url, type, payload) => {
    const before = await countEvents(t.db.pool);
    const res = await t.app.inject({ method: 'POST', url, headers: { 'content-type': type, 'x-api-key': EXAMPLE.key }, payload });
    expect({ status: res.statusCode, body: res.json() }).toEqual({
      status: 415,
      body: { error: 'unsupported content type: send application/json' },
    });
    expect(await countEvents(t.db.pool)).toBe(before);
  });
});
