import { seedFixture } from '../../src/commands/provisioning/seed';
import { sendStreamId } from '../../src/commands/send/decider';
import type { SandboxProvider } from '../../src/adapters/provider/sandbox';
import { type MessagingProvider, ProviderError } from '../../src/ports/provider';
import { createTestApp } from '../support/services';
import { countEventsOfType, eventsOf, INVOICE_TEMPLATE, invoiceVariables, OTHER, SHOP, sendsFixture } from '../support/sends';

// POST /api/v1/platform-templates/send/ and GET /api/v1/platform-templates/messages/{id}/ (sandbox provider,
// delivery off, in-process transport, real Postgres).

const NOW = '2026-03-01T10:00:00.000Z';
const SEND = '/api/v1/platform-templates/send/';

type T = Awaited<ReturnType<typeof createTestApp>>;

describe('single template send', () => {
  let t: T;
  const clock = new Date(NOW);

  beforeAll(async () => {
    t = await createTestApp({ now: () => clock });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const send = (payload: unknown, key: string | null = SHOP.key) =>
    t.app.inject({ method: 'POST', url: SEND, headers: key ? { 'x-api-key': key } : {}, payload: payload as object });
  const getMessage = (id: string, key: string = SHOP.key) =>
    t.app.inject({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, headers: { 'x-api-key': key } });
  const invoice = (overrides: Record<string, unknown> = {}) => ({
    phone_number_id: SHOP.number.phoneNumberId,
    template_name: 'invoice_ready',
    language: 'es',
    recipient_phone: '+5491155551234',
    variables: invoiceVariables,
    button_variables: { button_0: 'F-0001' },
    ...overrides,
  });
  const sandbox = () => t.services.provider as SandboxProvider;

  describe('field validation (400, {field: [messages]})', () => {
    it('names every missing required field', async () => {
      const res = await send({});
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        phone_number_id: ['This field is required.'],
        template_name: ['This field is required.'],
        recipient_phone: ['This field is required.'],
      });
    });

    it('refuses blank fields', async () => {
      const res = await send({ ...invoice(), phone_number_id: '  ', template_name: '' });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ phone_number_id: ['This field may not be blank.'], template_name: ['This field may not be blank.'] });
    });

    it.each(['5491155551234', '+54 9 11 5555-1234', '+54911abc', '+'])('recipient_phone %p must be + and digits', async (phone) => {
      const res = await send(invoice({ recipient_phone: phone }));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        recipient_phone: ['Enter the phone number in international format: a leading + and digits only, no spaces.'],
      });
    });

    it('refuses non-string and non-object types', async () => {
      const res = await send(invoice({ phone_number_id: 123, variables: ['a'], button_variables: 'x' }));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        phone_number_id: ['Not a valid string.'],
        variables: ['variables must be a JSON object.'],
        button_variables: ['button_variables must be a JSON object.'],
      });
    });

    it('requires the template variables and the dynamic URL suffix', async () => {
      const res = await send(invoice({ variables: {}, button_variables: {} }));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        variables: [
          "Variable 'banner' is required.",
          "Variable 'name' is required.",
          "Variable 'total' is required.",
          "Variable 'due' is required.",
        ],
        button_variables: ["'button_0' is required: button 0 is a URL button with a dynamic suffix."],
      });
    });

    it('checks variable types: TEXT non-empty, CURRENCY, DATE_TIME, media URL; unknown names', async () => {
      const res = await send(invoice({ variables: { banner: 'ftp://x/y.png', name: '', total: 'lots', due: '10/03/2026', colour: 'red' } }));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        variables: [
          "Unknown variable 'colour': the template has no such variable.",
          "Variable 'banner' (IMAGE) must be an http(s) URL.",
          "Variable 'name' (TEXT) may not be blank.",
          `Variable 'total' (CURRENCY) must be {"amount": <number>, "code": "<ISO 4217>"} or a string like "ARS 12.50".`,
          `Variable 'due' (DATE_TIME) must be an ISO 8601 date or date-time, or {"fallback_value": "<text>"}.`,
        ],
      });
    });

    it('a URL button takes one variable; keys are button_<index> of a button that takes one', async () => {
      const res = await send(invoice({ button_variables: { button_0: ['a', 'b'], button_7: 'x', extra: 'y' } }));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        button_variables: [
          "'button_7': the template has no button 7.",
          "Invalid key 'extra': use button_0, button_1, ... (button index from 0).",
          "'button_0': URL buttons take only 1 variable.",
        ],
      });
    });

    it('nothing is sent or recorded for a refused request', async () => {
      const before = sandbox().sendCount;
      await send(invoice({ variables: {} }));
      expect(sandbox().sendCount).toBe(before);
      expect(await countEventsOfType(t.db.pool, 'TemplateSendRequested')).toBe(0);
    });
  });

  describe('lookups', () => {
    it('401 without an API key', async () => {
      const res = await send(invoice(), null);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'API key required: send it in the X-API-Key header' });
    });

    it('404 for a phone number id the company does not have (unknown, or another company\'s)', async () => {
      for (const id of ['999999', OTHER.number.phoneNumberId]) {
        const res = await send(invoice({ phone_number_id: id }));
        expect(res.statusCode).toBe(404);
        expect(res.json()).toEqual({ error: `Phone number '${id}' not found for this business account.` });
      }
    });

    it('404 for a template name or language the number does not have', async () => {
      let res = await send(invoice({ template_name: 'nope' }));
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: "Template 'nope' (language 'es') not found for this business account." });
      res = await send(invoice({ language: 'pt_BR' }));
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: "Template 'invoice_ready' (language 'pt_BR') not found for this business account." });
    });

    it('400 for a template that is not APPROVED', async () => {
      const res = await send({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'promo', recipient_phone: '+5491155550001' });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: "Template 'promo' (language 'es') is not approved (status PAUSED)." });
    });
  });

  describe('200', () => {
    it('answers the spec body and sends the built components', async () => {
      const res = await send(invoice());
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toEqual({
        success: true,
        message_id: expect.stringMatching(/^wamid\.[A-Za-z0-9_-]+$/),
        template_name: 'invoice_ready',
        recipient_phone: '+5491155551234',
        status: 'sent',
        sent_at: NOW,
      });
      expect(sandbox().requests.at(-1)).toEqual({
        phoneNumberId: SHOP.number.phoneNumberId,
        to: '+5491155551234',
        template: 'invoice_ready',
        language: 'es',
        components: [
          { type: 'header', parameters: [{ type: 'image', image: { link: 'https://cdn.example/banner.jpg' } }] },
          {
            type: 'body',
            parameters: [
              { type: 'text', text: 'Ana' },
              { type: 'currency', currency: { fallback_value: 'ARS 1500.75', code: 'ARS', amount_1000: 1500750 } },
              { type: 'date_time', date_time: { fallback_value: '2026-03-10T12:00:00-03:00' } },
            ],
          },
          { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: 'F-0001' }] },
        ],
      });
    });

    it('language defaults to es; another language picks that template', async () => {
      const es = await send({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155550002' });
      expect(es.statusCode).toBe(200);
      expect(sandbox().requests.at(-1)).toMatchObject({ template: 'welcome', language: 'es', components: [] });
      const en = await send({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'en', recipient_phone: '+5491155550002' });
      expect(en.statusCode).toBe(200);
      expect(sandbox().requests.at(-1)).toMatchObject({ template: 'welcome', language: 'en' });
      const record = (await getMessage(en.json().message_id)).json();
      expect(record.template).toEqual({ id: 3103, name: 'welcome', language: 'en', category: 'MARKETING' });
    });

    it('records Requested then Accepted on send-{id}, and the outbound template message for the export', async () => {
      const res = await send(invoice({ recipient_phone: '+5491155550003' }));
      const messageId = res.json().message_id;
      const r = await t.db.pool.query(`SELECT stream_id FROM es.events WHERE type = 'TemplateSendAccepted' AND data->>'providerMessageId' = $1`, [messageId]);
      const events = await eventsOf(t.db.pool, r.rows[0].stream_id);
      expect(events.map((e) => e.type)).toEqual(['TemplateSendRequested', 'TemplateSendAccepted']);
      const sendId = events[0].data.sendId;
      expect(r.rows[0].stream_id).toBe(sendStreamId(sendId));
      expect(events[0].data).toEqual({
        sendId, companyId: SHOP.companyId, numberId: SHOP.number.id, phoneNumberId: SHOP.number.phoneNumberId,
        templateId: INVOICE_TEMPLATE.id, templateName: 'invoice_ready', language: 'es', category: 'UTILITY',
        recipientPhone: '+5491155550003', recipientE164: '+5491155550003', variables: invoiceVariables,
        buttonVariables: { button_0: 'F-0001' }, requestedAt: NOW,
      });
      expect(events[1].data).toEqual({
        sendId, companyId: SHOP.companyId, numberId: SHOP.number.id, recipientE164: '+5491155550003', providerMessageId: messageId, acceptedAt: NOW,
      });
      const conv = await t.db.pool.query(`SELECT stream_id, data FROM es.events WHERE type = 'MessageRecorded' AND data->>'messageId' = $1`, [messageId]);
      expect(conv.rows).toHaveLength(1);
      expect(conv.rows[0].stream_id).toBe(`conversation-${SHOP.companyId}-msgapp-${SHOP.number.phoneNumberId}-5491155550003`);
      expect(conv.rows[0].data).toMatchObject({
        direction: 'outbound', channel: 'PROVIDER_MSGAPP', author: { type: 'system' }, contactPhone: '+5491155550003',
        content: { type: 'notification_template', mediaUrl: null, mediaMime: null },
      });
    });
  });

  describe('provider refusal', () => {
    it('422 for a non-retryable refusal (131026), recorded as TemplateSendRejected', async () => {
      const res = await send(invoice({ recipient_phone: '+5491155550000' }));
      expect(res.statusCode).toBe(422);
      expect(res.json()).toEqual({ error: 'The provider refused the message (131026): Message undeliverable' });
      const r = await t.db.pool.query(`SELECT stream_id, data FROM es.events WHERE type = 'TemplateSendRejected'`);
      expect(r.rows).toHaveLength(1);
      expect(r.rows[0].data).toEqual({
        sendId: expect.any(String), companyId: SHOP.companyId, code: '131026', message: 'Message undeliverable', retryable: false, rejectedAt: NOW,
      });
      expect((await eventsOf(t.db.pool, r.rows[0].stream_id)).map((e) => e.type)).toEqual(['TemplateSendRequested', 'TemplateSendRejected']);
      const row = await t.db.pool.query('SELECT was_successful, status, status_error_code, error_message FROM rm_sends.sends WHERE send_id = $1', [r.rows[0].data.sendId]);
      expect(row.rows[0]).toEqual({ was_successful: false, status: 'failed', status_error_code: '131026', error_message: 'Message undeliverable' });
    });
  });

  describe('quota gate', () => {
    it('429 once the TIER_50 number has reached 50 unique recipients; a recipient already in the window still goes', async () => {
      const base = { phone_number_id: SHOP.smallNumber.phoneNumberId, template_name: 'welcome' };
      const recipient = (i: number) => `+54911600${String(i).padStart(4, '0')}1`;
      // 50 sends, each answered once the read models have it (read-your-writes); the log is read only below the cluster's
      // oldest running transaction (test databases share one cluster, other suites hold transactions open), so each may
      // wait ~1 s: past jest's 60 s
      for (let i = 0; i < 50; i++) {
        const res = await send({ ...base, recipient_phone: recipient(i) });
        expect(res.statusCode).toBe(200);
      }
      const again = await send({ ...base, recipient_phone: recipient(7) }); // already in the window
      expect(again.statusCode).toBe(200);
      const res = await send({ ...base, recipient_phone: '+5491169999991' }); // a new recipient
      expect(res.statusCode).toBe(429);
      expect(res.json()).toEqual({
        error: `Messaging quota exhausted for phone number '${SHOP.smallNumber.phoneNumberId}': 50 of 50 unique recipients in the last 24 h (TIER_50).`,
      });
      const accounts = await t.app.inject({ method: 'GET', url: '/api/v1/business-accounts/', headers: { 'x-api-key': SHOP.key } });
      const small = accounts.json().phoneNumbers.find((n: any) => n.phoneNumberId === SHOP.smallNumber.phoneNumberId);
      expect(small.quota).toEqual({ dailyLimit: 50, uniqueNumbersSent24h: 50, remaining: 0, usagePercentage: 100, canSend: false });
    }, 240_000);
  });

  it('the OpenAPI document describes the send and message routes (the webhook ingress stays hidden)', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/api/v1/platform-templates/send/', '/api/v1/platform-templates/messages/{message_id}/']));
    expect(doc.paths['/webhooks/provider']).toBeUndefined();
    expect(doc.paths['/api/v1/platform-templates/send/'].post.requestBody.content['application/json'].schema.required)
      .toEqual(['phone_number_id', 'template_name', 'recipient_phone']);
  });

  describe('GET /api/v1/platform-templates/messages/{message_id}/', () => {
    it('returns the full status record right after the send (read-your-writes), recipient matched by phone variant', async () => {
      const sent = (await send(invoice())).json();
      const res = await getMessage(sent.message_id);
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toEqual({
        id: expect.any(Number),
        template: { id: 3101, name: 'invoice_ready', language: 'es', category: 'UTILITY' },
        recipient: { phone: '+5491155551234', contact_name: SHOP.contact.fullName, contact_id: SHOP.contact.id },
        variables_used: invoiceVariables,
        delivery_status: {
          current: 'sent', sent_at: NOW, delivered_at: null, read_at: null, failed_at: null, error_code: null, error_message: null,
        },
        meta_message_id: sent.message_id,
        was_successful: true,
        error_message: null,
        sent_at: NOW,
      });
      expect(Number.isInteger(body.id) && body.id > 0).toBe(true);
    });

    it('finds every message right after its 200 (read-your-writes, repeated)', async () => {
      for (let i = 0; i < 10; i++) {
        const sent = (await send({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: `+54911700000${i}1` })).json();
        const res = await getMessage(sent.message_id);
        expect(res.statusCode).toBe(200);
        expect(res.json().recipient).toEqual({ phone: `+54911700000${i}1`, contact_name: null, contact_id: null });
      }
    });

    it('assigns increasing integer ids', async () => {
      const a = (await send({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491170000101' })).json();
      const b = (await send({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491170000102' })).json();
      const ia = (await getMessage(a.message_id)).json().id;
      const ib = (await getMessage(b.message_id)).json().id;
      expect(ib).toBeGreaterThan(ia);
    });

    it('404 for an unknown message id', async () => {
      const res = await getMessage('wamid.UNKNOWN');
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: 'Message not found.' });
    });

    it("403 for another company's message", async () => {
      const sent = (await send(invoice())).json();
      const res = await getMessage(sent.message_id, OTHER.key);
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ error: 'You do not have access to this message.' });
    });
  });
});

describe('single template send with the provider unavailable', () => {
  let t: T;
  let calls = 0;
  const down: MessagingProvider = {
    kind: 'test',
    async sendTemplate() {
      calls++;
      throw new ProviderError('http_503', 'provider answered HTTP 503', true, { httpStatus: 503, attempts: 3 });
    },
  };

  beforeAll(async () => {
    t = await createTestApp({ provider: down, now: () => new Date(NOW) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('502 when the provider stays unavailable after retries; the attempt is recorded', async () => {
    const res = await t.app.inject({
      method: 'POST', url: SEND, headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155551234' },
    });
    expect(res.statusCode).toBe(502);
    expect(res.json()).toEqual({ error: 'The provider is unavailable (http_503): provider answered HTTP 503' });
    expect(calls).toBe(1);
    const r = await t.db.pool.query(`SELECT data FROM es.events WHERE type = 'TemplateSendRejected'`);
    expect(r.rows.map((x) => x.data)).toEqual([
      { sendId: expect.any(String), companyId: SHOP.companyId, code: 'http_503', message: 'provider answered HTTP 503', retryable: true, rejectedAt: NOW },
    ]);
    // a failed attempt uses no quota
    const q = await t.db.pool.query('SELECT count(*)::int AS n FROM rm_accounts.quota_recipients');
    expect(q.rows[0].n).toBe(0);
  });
});

describe('what a send validates against follows provisioning at once', () => {
  it('a template paused (or a number removed from the fixture) after a send is refused on the very next send', async () => {
    const t = await createTestApp({ now: () => new Date(NOW) });
    try {
      const fixture = sendsFixture();
      await seedFixture(t.services, fixture, { actor: 'test' });
      const body = {
        phone_number_id: SHOP.number.phoneNumberId, template_name: 'invoice_ready', language: 'es',
        recipient_phone: '+5491155551234', variables: invoiceVariables, button_variables: { button_0: 'F-1' },
      };
      const send = () => t.app.inject({ method: 'POST', url: SEND, headers: { 'x-api-key': SHOP.key }, payload: body });
      expect((await send()).statusCode).toBe(200); // number and template now cached in this process
      const shop = fixture.companies.find((c: any) => c.id === SHOP.companyId);
      const invoiceTemplate = shop.phoneNumbers.find((n: any) => n.id === SHOP.number.id).templates.find((x: any) => x.name === 'invoice_ready');
      invoiceTemplate.status = 'PAUSED';
      await seedFixture(t.services, fixture, { actor: 'test' });
      const res = await send();
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: "Template 'invoice_ready' (language 'es') is not approved (status PAUSED)." });
      invoiceTemplate.status = 'APPROVED';
      await seedFixture(t.services, fixture, { actor: 'test' });
      expect((await send()).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });
});
