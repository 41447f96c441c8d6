import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { buildApp } from '../../src/http/app';
import { EXAMPLE, exampleFixture } from '../support/provisioning';
import { createTestContext, type TestContext } from '../support/services';

// Regression review 23a of c60889f (review 22, the Host header): the check it added (RFC 9112 section 3.2, RFC 3986
// section 3.2.2) took any `%` and anything in brackets, and a port after no host: `Host: a%zz`, `[zzz]`, `:8080` were
// served and put into the bulk lists' `next`/`previous` links, which then were no URLs (`new URL` refuses them; the
// links were `http://:8080/api/...`, the `http:///api/...` c60889f fixed for an empty Host). A percent-escape is `%`
// and two hex digits, an IP literal an IPv6 address (a zone `%25...` allowed) or `v<hex>.<...>`, and an http
// authority with a port has a host (RFC 9110 section 4.2.1: an empty host is invalid).

const K = EXAMPLE.key;
const BULK = '/api/v1/platform-templates/bulk-sends/';

interface Answer { status: number; body: any }

function one(port: number, bytes: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      const body = text.slice(end + 4);
      resolve({ status: Number(text.split(' ')[1]), body: body === '' ? undefined : JSON.parse(body) });
    });
    socket.write(Buffer.from(bytes, 'latin1'));
  });
}

const list = (target: string, host: string) =>
  `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nX-API-Key: ${K}\r\nConnection: close\r\n\r\n`;

describe('regression review 23a: the Host check of c60889f', () => {
  let ctx: TestContext;
  let app: FastifyInstance;
  let port = 0;

  beforeAll(async () => {
    ctx = await createTestContext();
    await seedFixture(ctx.services, exampleFixture(), { actor: 'test' });
    app = await buildApp(ctx.services);
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as { port: number }).port;
    // two bulk sends, so that a list of one a page has a `next` link
    const bulk = JSON.stringify({
      phone_number_id: '109876543210001', template_name: 'appointment_reminder',
      recipients: [{ phone: '+5491155550001', variables: { patient_name: 'A', appointment_at: '2026-12-01T10:00:00Z' } }],
    });
    for (let i = 0; i < 2; i++) {
      const made = await one(port, `POST /api/v1/platform-templates/send-bulk/ HTTP/1.1\r\nHost: h\r\nX-API-Key: ${K}\r\nContent-Type: application/json\r\nContent-Length: ${bulk.length}\r\nConnection: close\r\n\r\n${bulk}`);
      expect(made.status).toBe(202);
    }
  });
  afterAll(async () => {
    await app?.close();
    await ctx?.close();
  });

  it.each(['a%zz', 'a%4', 'api%.example', '[zzz]', '[]', '[v.x]', ':8080', ':'])(
    'Host: %s is 400 {error} (it was served, its links no URLs)',
    async (host) => {
      const answer = await one(port, list(`${BULK}?page_size=1`, host));
      expect(answer).toEqual({ status: 400, body: { error: 'the Host header is not a valid host[:port]' } });
    },
  );

  it('in absolute form, an authority of that kind is 400 too', async () => {
    for (const authority of ['a%zz', '[zzz]', ':8080']) {
      const answer = await one(port, list(`http://${authority}${BULK}?page_size=1`, 'h'));
      expect({ authority, ...answer }).toEqual({ authority, status: 400, body: { error: 'the Host header is not a valid host[:port]' } });
    }
  });

  it('valid hosts are still served, their links URLs naming them', async () => {
    for (const host of ['a%41.example', 'localhost:0', 'API.Example.COM.', '[::1]:8080', '[::FFFF:127.0.0.1]', 'h:', "a'b,c"]) {
      const answer = await one(port, list(`${BULK}?page_size=1`, host));
      expect({ host, status: answer.status }).toEqual({ host, status: 200 });
      expect(answer.body.next).toBe(`http://${host}${BULK}?page_size=1&page=2`);
      expect(() => new URL(answer.body.next)).not.toThrow();
    }
    // RFC-valid, though WHATWG URLs take neither: served as before
    for (const host of ['[fe80::1%25eth0]', '[v1.fe80::a+en1]']) {
      expect({ host, status: (await one(port, list(`${BULK}?page_size=1`, host))).status }).toEqual({ host, status: 200 });
    }
  });
});
