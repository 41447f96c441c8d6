import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { SHOP, sendsFixture } from '../support/sends';

/** docs/idempotency.md with its line breaks and indentation as single spaces */
const DOCS = readFileSync(join(__dirname, '../../docs/idempotency.md'), 'utf8').replace(/\s+/g, ' ');

// docs/idempotency.md, "Format", over a real socket (Node's HTTP parser, not inject): a key with a character outside
// 0x20-0x7E answers the documented 400 body, except a control character other than a tab (0x7F included), which
// Node's parser refuses before the route: 400 {"error": "the HTTP request is malformed"} (docs corrected 2026-11-28).

const UPSERT = '/api/v1/external/contacts/upsert/';

function rawPost(port: number, keyLine: Buffer): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({ phone: '+5491155558899' });
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(Buffer.concat([
        Buffer.from([`POST ${UPSERT} HTTP/1.1`, 'Host: localhost', `X-API-Key: ${SHOP.key}`, 'Content-Type: application/json',
          `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close', ''].join('\r\n')),
        Buffer.from('Idempotency-Key: '), keyLine, Buffer.from(`\r\n\r\n${body}`),
      ]));
    });
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('end', () => {
      const [head, ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), body: rest.join('\r\n\r\n') });
    });
    socket.on('error', reject);
  });
}

describe('docs/idempotency.md: the malformed keys answer as written', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let port: number;

  beforeAll(async () => {
    t = await createTestApp();
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  const formatError = JSON.stringify({ error: 'Idempotency-Key must be 1 to 255 printable ASCII characters.' });
  const malformed = JSON.stringify({ error: 'the HTTP request is malformed' });

  it('the docs show both bodies', () => {
    expect(DOCS).toContain('Anything else: **400** `{"error": "Idempotency-Key must be 1 to 255 printable ASCII characters."}`');
    expect(DOCS).toContain('a control character other than a tab, 0x7F included, never reaches that check: Node\'s HTTP parser refuses the whole request, **400** `{"error": "the HTTP request is malformed"}`');
  });

  it('a tab inside, a non-ASCII byte or 256 characters: 400 with the format error', async () => {
    for (const key of [Buffer.from('a\tb'), Buffer.from('café'), Buffer.from('a'.repeat(256))]) {
      expect(await rawPost(port, key)).toEqual({ status: 400, body: formatError });
    }
  });

  it('another control character (0x01, 0x1F, 0x7F): 400 "the HTTP request is malformed", from Node\'s parser', async () => {
    for (const c of [0x01, 0x1f, 0x7f]) {
      expect(await rawPost(port, Buffer.from([0x61, c, 0x62]))).toEqual({ status: 400, body: malformed });
    }
  });
});
