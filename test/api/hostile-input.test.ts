import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXAMPLE, countEvents, exampleFixture } from '../support/provisioning';
import { createTestApp } from '../support/services';

// Hostile input over real HTTP (review of 2026-11-28, docs/conventions.md "Hostile input"): what the fuzz suites
// (test/fuzz/) do not send. Each refusal is a 4xx in the route's error shape and changes nothing.

type T = Awaited<ReturnType<typeof createTestApp>>;
const UPSERT = '/api/v1/external/contacts/upsert/';
const SEND = '/api/v1/platform-templates/send/';

interface Answer { status: number; body: any }

describe('hostile input over HTTP', () => {
  let t: T;
  let port = 0;
  let seq = 0;
  const freshPhone = () => `+5491164${String(1_000_000 + ++seq).slice(1)}`;

  beforeAll(async () => {
    t = await createTestApp();
    const doc = exampleFixture();
    // options spelled precomposed (NFC), as a configuration screen stores them
    doc.companies[0].contactLists[0].customFields.push(
      { id: 591, key: 'branch', name: 'Branch', fieldType: 'selector', options: ['Peña', 'Núñez'], required: false, group: null },
      { id: 592, key: 'interests', name: 'Interests', fieldType: 'multiselector', options: ['Café', 'Té', 'Mate'], required: false, group: null },
    );
    await seedFixture(t.services, doc, { actor: 'test' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** One request over a socket, bytes as given (Node's client would refuse some of these headers). */
  const raw = (text: string, body: Buffer = Buffer.alloc(0)): Promise<Answer> => new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', reject);
    socket.on('end', () => {
      const answer = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = answer.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), body: JSON.parse(rest.join('\r\n\r\n')) });
    });
    socket.write(Buffer.concat([Buffer.from(text, 'latin1'), body]));
  });

  const post = (path: string, headers: Record<string, string>, body: Buffer | string): Promise<Answer> => new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path, headers: { 'x-api-key': EXAMPLE.key, ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(body);
  });

  const lookup = async (phone: string) => (await t.app.inject({
    method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': EXAMPLE.key },
  })).json();

  describe('Host header sent twice (RFC 9112, section 3.2)', () => {
    it('400 {error}, nothing saved; one Host is served', async () => {
      const phone = freshPhone();
      const body = Buffer.from(JSON.stringify({ phone, full_name: 'Two Hosts' }));
      const head = (hosts: string[]) => `POST ${UPSERT} HTTP/1.1\r\n${hosts.map((h) => `Host: ${h}\r\n`).join('')}X-API-Key: ${EXAMPLE.key}\r\n`
        + `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
      const before = await countEvents(t.db.pool);
      expect(await raw(head(['api.example', 'evil.example']), body)).toEqual({ status: 400, body: { error: 'the Host header must be sent once' } });
      expect(await raw(head(['api.example', 'api.example']), body)).toEqual({ status: 400, body: { error: 'the Host header must be sent once' } });
      expect(await countEvents(t.db.pool)).toBe(before);
      expect(await lookup(phone)).toEqual({ found: false, contact: null });
      const once = await raw(head(['api.example']), body);
      expect(once.status).toBe(201);
      expect(once.body.contact).toMatchObject({ phone, fullName: 'Two Hosts' });
    });
  });

  describe('a body declared in a charset other than UTF-8', () => {
    it.each([
      ['latin1', Buffer.from('Zo\xeb', 'latin1')],
      ['ISO-8859-1', Buffer.from('Zo\xeb', 'latin1')],
      ['"utf-16le"', Buffer.from('Zo\u00eb', 'utf16le')],
    ])('charset=%s: 415 {error}, nothing saved (it was read as UTF-8: its letters stored as U+FFFD)', async (charset, name) => {
      const phone = freshPhone();
      const body = Buffer.concat([Buffer.from(`{"phone":"${phone}","full_name":"`), name, Buffer.from('"}')]);
      const before = await countEvents(t.db.pool);
      const res = await post(UPSERT, { 'content-type': `application/json; charset=${charset}` }, body);
      expect(res).toEqual({ status: 415, body: { error: `charset '${charset.replace(/"/g, '')}' is not supported: send the body as UTF-8` } });
      expect(await countEvents(t.db.pool)).toBe(before);
      expect(await lookup(phone)).toEqual({ found: false, contact: null });
    });

    it('the send refuses it in its own shape, before anything is sent', async () => {
      const before = await countEvents(t.db.pool);
      const res = await post(SEND, { 'content-type': 'application/json;charset=windows-1252' }, JSON.stringify({
        phone_number_id: '109876543210001', template_name: 'appointment_reminder', recipient_phone: freshPhone(),
        variables: { patient_name: 'Zoë', appointment_at: '2026-03-10T10:00:00-03:00' }, button_variables: { button_0: 'abc' },
      }));
      expect(res).toEqual({ status: 415, body: { error: "charset 'windows-1252' is not supported: send the body as UTF-8" } });
      expect(await countEvents(t.db.pool)).toBe(before);
    });

    it.each(['application/json', 'application/json; charset=utf-8', 'application/json;charset="UTF-8"', 'APPLICATION/JSON; Charset=utf8', 'application/json; charset=us-ascii'])(
      '%s is read as UTF-8 and served',
      async (type) => {
        const phone = freshPhone();
        const res = await post(UPSERT, { 'content-type': type }, Buffer.from(JSON.stringify({ phone, full_name: 'Zoë' }), 'utf8'));
        expect(res.status).toBe(201);
        expect(res.body.contact).toMatchObject({ phone, fullName: 'Zoë' });
      },
    );
  });

  describe('email addresses with empty domain labels', () => {
    it.each(['a@..', 'a@b..co', 'a@.b.co', 'a@b.co.', `a@${'.'.repeat(250)}`])('%s: 400 naming it, nothing saved', async (email) => {
      const phone = freshPhone();
      const before = await countEvents(t.db.pool);
      const res = await post(UPSERT, { 'content-type': 'application/json' }, JSON.stringify({ phone, email }));
      expect(res).toEqual({ status: 400, body: { error: `email ${JSON.stringify(email)} is not a valid email address` } });
      expect(await countEvents(t.db.pool)).toBe(before);
      expect(await lookup(phone)).toEqual({ found: false, contact: null });
    });

    it.each(['x.y+z@mail.example.com', 'ñandú@correo.example.ar'])('%s is an address', async (email) => {
      const phone = freshPhone();
      const res = await post(UPSERT, { 'content-type': 'application/json' }, JSON.stringify({ phone, email }));
      expect(res.status).toBe(201);
      expect(res.body.contact).toMatchObject({ phone, email });
    });
  });

  describe('selector options in another Unicode normalization form (NFD: a letter and a combining mark)', () => {
    const NFD_PENA = 'Pen\u0303a';
    const NFD_CAFE = 'Cafe\u0301';
    const upsert = (phone: string, customFields: unknown[]) =>
      post(UPSERT, { 'content-type': 'application/json' }, JSON.stringify({ phone, custom_fields: customFields }));
    const valueOf = (res: Answer, key: string) => res.body.contact.customFields.find((f: { key: string }) => f.key === key);

    it('name the same option: stored as configured; the other spelling again makes no new version', async () => {
      const phone = freshPhone();
      expect(NFD_PENA).not.toBe('Peña');
      const created = await upsert(phone, [{ key: 'branch', value: [NFD_PENA] }, { key: 'interests', value: ['Mate', NFD_CAFE] }]);
      expect(created.status).toBe(201);
      expect(valueOf(created, 'branch')).toMatchObject({ value: ['Peña'], version: 1 });
      expect(valueOf(created, 'interests')).toMatchObject({ value: ['Café', 'Mate'], version: 1 });
      const again = await upsert(phone, [{ key: 'branch', value: ['Peña'] }, { key: 'interests', value: ['Café', 'Mate'] }]);
      expect(again.status).toBe(200);
      expect(again.body.versionedCustomFields).toEqual([]);
    });

    it('one option in both spellings is one option twice: 400, nothing saved', async () => {
      const phone = freshPhone();
      const before = await countEvents(t.db.pool);
      const res = await upsert(phone, [{ key: 'interests', value: ['Café', NFD_CAFE] }]);
      expect(res).toEqual({ status: 400, body: { error: 'custom_fields[0] ("interests"): values must be distinct' } });
      expect(await countEvents(t.db.pool)).toBe(before);
      expect(await lookup(phone)).toEqual({ found: false, contact: null });
    });

    it('a value that is no option in any form is still refused', async () => {
      const res = await upsert(freshPhone(), [{ key: 'branch', value: ['Pena'] }]);
      expect(res).toEqual({ status: 400, body: { error: 'custom_fields[0] ("branch"): value must be one of ["Peña","Núñez"]' } });
    });
  });
});
