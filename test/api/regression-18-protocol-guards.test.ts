import { request as httpRequest } from 'node:http';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXAMPLE, exampleFixture } from '../support/provisioning';
import { createTestApp } from '../support/services';

// Regression review 18 (docs/reliability.md): eb35223 refused a body declared in a charset other than UTF-8 (415) on
// every method, a GET's too, whose body fastify never reads (nothing is decoded nor stored): a GET served before was
// refused for a header on a body nobody reads. A GET or HEAD is served whatever the charset; a body that is read
// (POST) is still refused, and a UTF-8 charset followed by other parameters is served. Over real HTTP (loopback).

type T = Awaited<ReturnType<typeof createTestApp>>;
const LOOKUP = '/api/v1/external/contacts/?phone=%2B5491165000001';
const UPSERT = '/api/v1/external/contacts/upsert/';

describe('regression review 18: the charset refusal and bodies that are not read', () => {
  let t: T;
  let port = 0;

  beforeAll(async () => {
    t = await createTestApp();
    await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  const send = (method: string, path: string, contentType: string, body: string): Promise<{ status: number; body: unknown }> =>
    new Promise((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1', port, method, path,
        headers: { 'x-api-key': EXAMPLE.key, 'content-type': contentType, 'content-length': String(Buffer.byteLength(body)) },
      }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text === '' ? undefined : JSON.parse(text) }));
      });
      req.on('error', reject);
      req.end(body);
    });

  it('a GET with a body declared latin1 is served as without it', async () => {
    const plain = await send('GET', LOOKUP, 'application/json', '{}');
    expect(plain).toEqual({ status: 200, body: { found: false, contact: null } });
    for (const charset of ['latin1', 'utf-16', '"ISO-8859-1"']) {
      expect(await send('GET', LOOKUP, `application/json; charset=${charset}`, '{}')).toEqual(plain);
    }
  });

  it('a HEAD with such a body is served', async () => {
    const res = await send('HEAD', LOOKUP, 'application/json; charset=latin1', '{}');
    expect(res.status).toBe(200);
  });

  it('a POST with such a body is still refused, and charset=utf-8 with parameters after it is served', async () => {
    expect(await send('POST', UPSERT, 'application/json; charset=latin1', '{}')).toEqual({
      status: 415, body: { error: "charset 'latin1' is not supported: send the body as UTF-8" },
    });
    const served = await send('POST', UPSERT, 'application/json; charset=utf-8; profile="x"', JSON.stringify({ phone: '+5491165000002', full_name: 'Ana' }));
    expect(served.status).toBeLessThan(300);
  });
});
