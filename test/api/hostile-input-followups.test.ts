import { request as httpRequest } from 'node:http';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { buildComponents, type TemplateShape } from '../../src/commands/send/components';
import { COUNTRY_CODE_MESSAGE, SEND_PHONE_MESSAGE, sendPhoneProblem } from '../../src/shared/phone';
import { signWebhook } from '../../src/shared/provider-webhook';
import { EXAMPLE, countEvents, exampleFixture } from '../support/provisioning';
import { APP_SECRET } from '../support/sends';
import { createTestApp } from '../support/services';

// What the hostile-input review (docs/conventions.md, "Hostile input (reviewed 2026-11-28)") noticed and left: a body
// that is not UTF-8, a send's recipient whose country code starts with 0, the webhook deliveries list's loose page
// numbers, and template variables named like Object.prototype's members. Over real HTTP (loopback); each refusal is
// the route's 400 in its error shape and changes nothing.

type T = Awaited<ReturnType<typeof createTestApp>>;
const UPSERT = '/api/v1/external/contacts/upsert/';
const SEND = '/api/v1/platform-templates/send/';
const SEND_BULK = '/api/v1/platform-templates/send-bulk/';
const ENDPOINTS = '/api/v1/webhook-endpoints/';
const NUMBER_ID = '109876543210001';
const NOT_UTF8 = 'request body is not valid UTF-8';

interface Answer { status: number; body: any }

/** A template whose variables are named like members of Object.prototype (only an operator can configure one). */
const PROTO_TEMPLATE = {
  id: 9901, name: 'proto_names', language: 'es', category: 'UTILITY', status: 'APPROVED',
  variables: [
    { name: 'toString', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
    { name: 'constructor', type: 'TEXT', position: 2, isRequired: true, component: 'BODY' },
    { name: 'hasOwnProperty', type: 'TEXT', position: 3, isRequired: false, component: 'BODY' },
    { name: 'valueOf', type: 'TEXT', position: 1, isRequired: false, component: 'BUTTON' },
  ],
  buttons: [{ type: 'URL', text: 'Open', url: 'https://shop.example/o/{{1}}' }, { type: 'QUICK_REPLY', text: 'Stop' }],
};

describe('hostile input, the review\'s follow-ups', () => {
  let t: T;
  let port = 0;
  let seq = 0;
  const freshPhone = () => `+5491165${String(1_000_000 + ++seq).slice(1)}`;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_HTTP: 'true', WEBHOOKS_ALLOW_PRIVATE_URLS: 'true' } });
    const doc = exampleFixture();
    doc.companies[0].phoneNumbers[0].templates.push(PROTO_TEMPLATE);
    await seedFixture(t.services, doc, { actor: 'test' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** POST over real HTTP; the body written in the given pieces (more than one: chunked, each piece its own chunk). */
  const post = (path: string, headers: Record<string, string>, ...pieces: Array<Buffer | string>): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path, headers: { 'x-api-key': EXAMPLE.key, ...headers } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text === '' ? undefined : JSON.parse(text) }));
      });
      req.on('error', reject);
      if (pieces.length > 1) req.flushHeaders();
      for (const piece of pieces) req.write(piece);
      req.end();
    });
  const postJson = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    post(path, { 'content-type': 'application/json', ...headers }, JSON.stringify(body));
  const get = async (url: string): Promise<Answer> => {
    const res = await t.app.inject({ method: 'GET', url, headers: { 'x-api-key': EXAMPLE.key } });
    return { status: res.statusCode, body: res.json() };
  };
  const lookup = async (phone: string) => (await get(`/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`)).body;
  /** `before` + the bytes + `after`, as one body */
  const bytes = (before: string, raw: number[], after: string) => Buffer.concat([Buffer.from(before), Buffer.from(raw), Buffer.from(after)]);

  describe('a JSON body whose bytes are not UTF-8 (it was read with U+FFFD in their place and stored: 201)', () => {
    const BAD: Array<[string, number[]]> = [
      ['a latin1 byte (0xEB)', [0x5a, 0x6f, 0xeb]],
      ['0xFF', [0xff]],
      ['a lone continuation byte', [0x80]],
      ['an overlong "/" (C0 AF)', [0xc0, 0xaf]],
      ['a UTF-16 surrogate encoded (ED A0 80)', [0xed, 0xa0, 0x80]],
      ['a truncated emoji (F0 9F 98)', [0xf0, 0x9f, 0x98]],
      ['beyond U+10FFFF (F4 90 80 80)', [0xf4, 0x90, 0x80, 0x80]],
    ];

    it.each(BAD)('%s in a name: 400 {error}, nothing saved', async (_what, raw) => {
      for (const type of ['application/json', 'application/json; charset=utf-8', 'application/json; charset=us-ascii']) {
        const phone = freshPhone();
        const before = await countEvents(t.db.pool);
        const res = await post(UPSERT, { 'content-type': type }, bytes(`{"phone":"${phone}","full_name":"`, raw, '"}'));
        expect(res).toEqual({ status: 400, body: { error: NOT_UTF8 } });
        expect(await countEvents(t.db.pool)).toBe(before);
        expect(await lookup(phone)).toEqual({ found: false, contact: null });
      }
    });

    it('in a key, outside any string, or in a chunked body: 400 {error}', async () => {
      const phone = freshPhone();
      const before = await countEvents(t.db.pool);
      expect(await post(UPSERT, { 'content-type': 'application/json' }, bytes(`{"phone":"${phone}","full_`, [0xff], 'name":"x"}')))
        .toEqual({ status: 400, body: { error: NOT_UTF8 } });
      expect(await post(UPSERT, { 'content-type': 'application/json' }, bytes(`{"phone":"${phone}"}`, [0xff], '')))
        .toEqual({ status: 400, body: { error: NOT_UTF8 } });
      expect(await post(UPSERT, { 'content-type': 'application/json' }, `{"phone":"${phone}","full_name":"Zo`, Buffer.from([0xeb]), '"}'))
        .toEqual({ status: 400, body: { error: NOT_UTF8 } });
      expect(await countEvents(t.db.pool)).toBe(before);
      expect(await lookup(phone)).toEqual({ found: false, contact: null });
    });

    it('the send refuses it in its own shape ({error}, as a body that is not JSON), before anything is sent', async () => {
      const before = await countEvents(t.db.pool);
      const body = bytes(`{"phone_number_id":"${NUMBER_ID}","template_name":"appointment_reminder","recipient_phone":"${freshPhone()}",`
        + '"variables":{"patient_name":"Zo', [0xeb], '","appointment_at":"2026-03-10T10:00:00-03:00"},"button_variables":{"button_0":"abc"}}');
      expect(await post(SEND, { 'content-type': 'application/json' }, body)).toEqual({ status: 400, body: { error: NOT_UTF8 } });
      expect(await post(SEND, { 'content-type': 'application/json', 'idempotency-key': `utf8-${seq}` }, body)).toEqual({ status: 400, body: { error: NOT_UTF8 } });
      const bulk = bytes(`{"phone_number_id":"${NUMBER_ID}","template_name":"appointment_reminder","recipients":[{"phone":"${freshPhone()}",`
        + '"variables":{"patient_name":"', [0xff], '"}}]}');
      expect(await post(SEND_BULK, { 'content-type': 'application/json' }, bulk)).toEqual({ status: 400, body: { error: NOT_UTF8 } });
      expect(await countEvents(t.db.pool)).toBe(before);
    });

    it('UTF-8 is read as before: a character split across chunks, a BOM, U+FFFD itself, and the other body refusals', async () => {
      const phone = freshPhone();
      const emoji = Buffer.from('😀');
      const split = await post(UPSERT, { 'content-type': 'application/json' },
        `{"phone":"${phone}","full_name":"Zoë `, emoji.subarray(0, 2), emoji.subarray(2), ' \uFFFD"}');
      expect(split.status).toBe(201);
      expect(split.body.contact).toMatchObject({ phone, fullName: 'Zoë 😀 \uFFFD' });
      const bom = freshPhone();
      const withBom = await post(UPSERT, { 'content-type': 'application/json' }, Buffer.from([0xef, 0xbb, 0xbf]), JSON.stringify({ phone: bom, full_name: 'Bom' }));
      expect(withBom.status).toBe(201);
      expect(withBom.body.contact).toMatchObject({ phone: bom, fullName: 'Bom' });
      expect(await post(UPSERT, { 'content-type': 'application/json' }, '{"phone":')).toEqual({ status: 400, body: { error: 'request body is not valid JSON' } });
      expect(await post(UPSERT, { 'content-type': 'application/json' }, `{"phone":"${freshPhone()}","__proto__":{"x":1}}`))
        .toEqual({ status: 400, body: { error: 'request body is not valid JSON' } });
      expect(await post(UPSERT, { 'content-type': 'application/json' }, `{"phone":"${freshPhone()}","full_name":"${'a'.repeat(1024 * 1024)}"}`))
        .toEqual({ status: 413, body: { error: 'request body is too large' } });
      // an empty JSON body is no body: a route that needs one answers its own 400
      expect(await post(UPSERT, { 'content-type': 'application/json' }, '')).toEqual({ status: 400, body: { error: 'request body must be a JSON object' } });
    });

    it("the provider's webhook ingress keeps reading its bytes as sent: signed over the raw bytes, served", async () => {
      const raw = bytes('{"object":"whatsapp_business_account","entry":[],"note":"', [0xff, 0xeb], '"}');
      const res = await t.app.inject({
        method: 'POST', url: '/webhooks/provider', payload: raw,
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) },
      });
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: { received: 0 } });
    });
  });

  describe('a send recipient whose country calling code starts with 0 (none does: it was sent as written)', () => {
    const sendBody = (recipient: string) => ({
      phone_number_id: NUMBER_ID, template_name: 'appointment_reminder', recipient_phone: recipient,
      variables: { patient_name: 'Ana', appointment_at: '2026-03-10T10:00:00-03:00' }, button_variables: { button_0: 'abc' },
    });

    it.each(['+005491155550001', '+05491155550001', '+0000000'])('the single send refuses %s: 400 {recipient_phone}, nothing recorded', async (phone) => {
      const before = await countEvents(t.db.pool);
      expect(await postJson(SEND, sendBody(phone))).toEqual({ status: 400, body: { recipient_phone: [COUNTRY_CODE_MESSAGE] } });
      expect(await postJson(SEND, sendBody(phone), { 'idempotency-key': `zero-cc-${phone}` }))
        .toEqual({ status: 400, body: { recipient_phone: [COUNTRY_CODE_MESSAGE] } });
      // a field, so before the number is looked up (docs/sends.md, "Order of checks")
      expect(await postJson(SEND, { ...sendBody(phone), phone_number_id: 'no-such-number' }))
        .toEqual({ status: 400, body: { recipient_phone: [COUNTRY_CODE_MESSAGE] } });
      expect(await countEvents(t.db.pool)).toBe(before);
    });

    it('the single send still takes + and 6 to 15 digits, and refuses other spellings as before', async () => {
      const ok = await postJson(SEND, sendBody(freshPhone()));
      expect(ok.status).toBe(200);
      expect(await postJson(SEND, sendBody('+54 9 11 5555 0001'))).toEqual({ status: 400, body: { recipient_phone: [SEND_PHONE_MESSAGE] } });
      expect(await postJson(SEND, sendBody('005491155550001'))).toEqual({ status: 400, body: { recipient_phone: [SEND_PHONE_MESSAGE] } });
    });

    it('send-bulk refuses such a recipient by its index, nothing stored', async () => {
      const before = await countEvents(t.db.pool);
      const res = await postJson(SEND_BULK, {
        phone_number_id: NUMBER_ID, template_name: 'appointment_reminder',
        recipients: [
          { phone: freshPhone(), variables: { patient_name: 'Ana', appointment_at: '2026-03-10T10:00:00-03:00' }, button_variables: { button_0: 'a' } },
          { phone: '+005491155550001', variables: { patient_name: 'Bea', appointment_at: '2026-03-10T10:00:00-03:00' }, button_variables: { button_0: 'b' } },
          { phone: '5491155550003', variables: {} },
        ],
      });
      expect(res).toEqual({ status: 400, body: { recipients: [`recipients[1].phone: ${COUNTRY_CODE_MESSAGE}`, `recipients[2].phone: ${SEND_PHONE_MESSAGE}`] } });
      expect(await countEvents(t.db.pool)).toBe(before);
    });

    it('contacts already refuse it (libphonenumber-js: no such country), and read the 00 prefix as docs/contacts.md says', async () => {
      const before = await countEvents(t.db.pool);
      const res = await postJson(UPSERT, { phone: '+005491155550001', full_name: 'Zero' });
      expect(res.status).toBe(400);
      expect(await countEvents(t.db.pool)).toBe(before);
      expect(await lookup('+005491155550001')).toEqual({ found: false, contact: null });
      const phone = freshPhone();
      const created = await postJson(UPSERT, { phone: `00${phone.slice(1)}`, full_name: 'Prefix' });
      expect(created.status).toBe(201);
      expect(created.body.contact).toMatchObject({ phone, fullName: 'Prefix' });
    });

    it('sendPhoneProblem', () => {
      expect(sendPhoneProblem('+5491155550001')).toBeUndefined();
      expect(sendPhoneProblem('+123456')).toBeUndefined();
      expect(sendPhoneProblem('+999123456789012')).toBeUndefined(); // not assigned: the provider's to refuse
      expect(sendPhoneProblem('+0123456')).toBe(COUNTRY_CODE_MESSAGE);
      expect(sendPhoneProblem('+12345')).toBe(SEND_PHONE_MESSAGE);
      expect(sendPhoneProblem('+1234567890123456')).toBe(SEND_PHONE_MESSAGE);
      expect(sendPhoneProblem('+0')).toBe(SEND_PHONE_MESSAGE);
    });
  });

  describe('the webhook deliveries list reads page and page_size as decimal digits only', () => {
    let deliveries = '';
    beforeAll(async () => {
      const created = await postJson(ENDPOINTS, { url: 'https://hooks.example/in', event_types: ['message.sent'] });
      expect(created.status).toBe(201);
      deliveries = `${ENDPOINTS}${created.body.id}/deliveries/`;
    });
    const EMPTY = { count: 0, next: null, previous: null, results: [] };

    it.each(['0x10', '0b11', '0o7', '1e3', '1.0', '%201', '1%20', '%2B1', '+1', '-1', '0', '', '-0', 'Infinity', 'NaN', '%EF%BC%92', '9007199254740993', '1&page=2'])(
      'page=%s and page_size=%s: 400 {error}',
      async (value) => {
        const page = await get(`${deliveries}?page=${value}`);
        expect(page).toEqual({ status: 400, body: { error: 'page: page must be a positive integer' } });
        const size = await get(`${deliveries}?page_size=${value.replace('page=', 'page_size=')}`);
        expect(size).toEqual({ status: 400, body: { error: 'page_size: page_size must be a positive integer' } });
      },
    );

    it('digits are served: 01 is 1, a page_size over 100 is clamped, the defaults hold', async () => {
      expect(await get(`${deliveries}?page=01&page_size=0020`)).toEqual({ status: 200, body: EMPTY });
      expect(await get(`${deliveries}?page_size=1000`)).toEqual({ status: 200, body: EMPTY });
      expect(await get(`${deliveries}?page=9007199254740991`)).toEqual({ status: 200, body: EMPTY });
      expect(await get(deliveries)).toEqual({ status: 200, body: EMPTY });
    });

    it('the OpenAPI document keeps them integers', async () => {
      const doc = (await get('/openapi.json')).body;
      const params = doc.paths['/api/v1/webhook-endpoints/{id}/deliveries/'].get.parameters as Array<{ name: string; in: string; schema: unknown }>;
      const query = Object.fromEntries(params.filter((p) => p.in === 'query').map((p) => [p.name, p.schema]));
      // as documented before (z.coerce.number): only what the route reads changed
      expect(query.page).toEqual({ type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, default: 1 });
      expect(query.page_size).toEqual({ type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, default: 20 });
    });
  });

  describe('template variables named like members of Object.prototype', () => {
    const send = (variables: Record<string, unknown>, buttonVariables: Record<string, unknown> = {}) => postJson(SEND, {
      phone_number_id: NUMBER_ID, template_name: 'proto_names', recipient_phone: freshPhone(), variables, button_variables: buttonVariables,
    });

    it('one left out is missing: "is required" when required (not "must be a string"), nothing when optional', async () => {
      const before = await countEvents(t.db.pool);
      expect(await send({})).toEqual({
        status: 400, body: { variables: ["Variable 'toString' is required.", "Variable 'constructor' is required."] },
      });
      expect(await countEvents(t.db.pool)).toBe(before);
      // hasOwnProperty (BODY) and valueOf (the URL button's, optional) left out: the send goes
      expect((await send({ toString: 'a', constructor: 'b' })).status).toBe(200);
      expect((await send({ toString: 'a', constructor: 'b', hasOwnProperty: 'c', valueOf: 'd' }, { button_1: 'stop' })).status).toBe(200);
    });

    it('buildComponents reads only the values sent', () => {
      const template = PROTO_TEMPLATE as unknown as TemplateShape;
      expect(buildComponents(template, {}, {})).toEqual({
        ok: false, errors: { variables: ["Variable 'toString' is required.", "Variable 'constructor' is required."] },
      });
      const built = buildComponents(template, { toString: 'a', constructor: 'b' }, {});
      expect(built).toEqual({ ok: true, components: [{ type: 'body', parameters: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }] });
      const sent = buildComponents(template, { toString: 'a', constructor: 'b', valueOf: 'v' }, { button_1: 'p' });
      expect(sent.ok && sent.components.slice(1)).toEqual([
        { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: 'v' }] },
        { type: 'button', sub_type: 'quick_reply', index: '1', parameters: [{ type: 'payload', payload: 'p' }] },
      ]);
    });
  });
});
