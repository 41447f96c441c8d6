import type { InjectOptions } from 'fastify';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXAMPLE, SECOND, exampleFixture, secondCompany } from '../support/provisioning';
import { createTestApp } from '../support/services';
import { checkedInject } from '../fuzz/support';

// Tenant isolation (issue #8): company A's key (101, Clinica Norte) asks for every object of company B
// (202, Ferreteria Sur) through every endpoint and every id-bearing parameter. Each answer is the documented
// 403/404 (or A's own, B-free data), and no byte of B's data appears in it: B's names, ids, phones, e-mails.

type T = Awaited<ReturnType<typeof createTestApp>>;
const B_NUMBER = '109876543210002';
const B_TEMPLATE_ID = 951;
const B_CONTACT = { fullName: 'Brunilda Zapatera', phone: '+5491149998877', email: 'brunilda@ferreteriasur.example' };
const B_BULK_PHONES = ['+5491149990101', '+5491149990102'];
const B_SEND_PHONE = '+5491149990103';

describe('tenant isolation: A\'s key never reaches B\'s objects', () => {
  let t: T;
  let bBulk = '';
  let bMessage = '';
  let bContactId = 0;
  let forbidden: string[] = [];

  const a = (o: Omit<InjectOptions, 'headers'> & { headers?: Record<string, string> }) =>
    checkedInject(t.app, t.db.pool, { ...o, headers: { 'x-api-key': EXAMPLE.key, ...(o.headers ?? {}) } } as InjectOptions);
  const b = (o: InjectOptions) => t.app.inject({ ...o, headers: { 'x-api-key': SECOND.key, ...(o.headers ?? {}) } } as InjectOptions);

  /** B's data must not be in A's response (case-insensitive; phones also without '+'). */
  const expectNoB = (body: string, allowed: string[] = []) => {
    const lower = body.toLowerCase();
    for (const s of forbidden) {
      if (allowed.includes(s)) continue;
      if (lower.includes(s.toLowerCase())) throw new Error(`B's data "${s}" leaked into A's response: ${body.slice(0, 500)}`);
    }
  };

  beforeAll(async () => {
    t = await createTestApp();
    const doc = exampleFixture({ keepContacts: true });
    doc.companies.push(secondCompany());
    await seedFixture(t.services, doc, { actor: 'test' });

    const contact = await b({ method: 'POST', url: '/api/v1/external/contacts/upsert/', payload: { phone: B_CONTACT.phone, full_name: B_CONTACT.fullName, email: B_CONTACT.email } });
    expect(contact.statusCode).toBe(201);
    bContactId = contact.json().contact.id;
    const send = await b({
      method: 'POST', url: '/api/v1/platform-templates/send/',
      payload: { phone_number_id: B_NUMBER, template_name: 'stock_alert', recipient_phone: B_SEND_PHONE, variables: { product: 'Taladro Percutor' } },
    });
    expect(send.statusCode).toBe(200);
    bMessage = send.json().message_id;
    const bulk = await b({
      method: 'POST', url: '/api/v1/platform-templates/send-bulk/',
      payload: { phone_number_id: B_NUMBER, template_name: 'stock_alert', recipients: B_BULK_PHONES.map((phone) => ({ phone, variables: { product: 'Martillo' } })) },
    });
    expect(bulk.statusCode).toBe(202);
    bBulk = bulk.json().bulk_send_id;

    forbidden = [
      'Ferreteria', 'ferreteriasur', 'Avellaneda', 'Dia del Trabajador', 'Raul', 'Sosa', 'Shop sync', 'Hardware',
      B_NUMBER, 'stock_alert', 'Taladro', 'Martillo', '+54 9 11 4999-0000', '541149990000',
      B_CONTACT.fullName, B_CONTACT.email, B_CONTACT.phone.slice(1), ...B_BULK_PHONES.map((p) => p.slice(1)), B_SEND_PHONE.slice(1),
      bBulk, bMessage, `"id":${bContactId},`,
    ];
    // sanity: B itself sees its data (the probes are not vacuous)
    const own = await b({ method: 'GET', url: `/api/v1/platform-templates/bulk-sends/${bBulk}/` });
    expect(own.statusCode).toBe(200);
    expect(own.body).toContain('stock_alert');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('business-info, business-hours, holidays, business-accounts: only A\'s data', async () => {
    for (const url of ['/api/v1/business-info/', '/api/v1/business-hours/', '/api/v1/holidays/', '/api/v1/holidays/?from=2026-01-01&to=2026-12-31', '/api/v1/business-accounts/']) {
      const res = await a({ method: 'GET', url });
      expect(res.statusCode).toBe(200);
      expectNoB(res.body);
    }
  });

  it('bulk-sends detail, messages and cancel of B\'s bulk: 404 {detail}, and B\'s bulk is untouched', async () => {
    for (const [method, url] of [
      ['GET', `/api/v1/platform-templates/bulk-sends/${bBulk}/`],
      ['GET', `/api/v1/platform-templates/bulk-sends/${bBulk}/messages/`],
      ['GET', `/api/v1/platform-templates/bulk-sends/${bBulk}/messages/?status=sent`],
      ['POST', `/api/v1/platform-templates/bulk-sends/${bBulk}/cancel/`],
    ] as const) {
      const res = await a({ method, url });
      expect(res.statusCode).toBe(404);
      expect(JSON.parse(res.body)).toEqual({ detail: expect.any(String) });
      expectNoB(res.body);
    }
    const still = await b({ method: 'GET', url: `/api/v1/platform-templates/bulk-sends/${bBulk}/` });
    expect(still.json().status).not.toBe('CANCELLED');
  });

  it('bulk-sends list: A never sees B\'s bulk, whatever the filters (B\'s template id included)', async () => {
    for (const qs of ['', `?template=${B_TEMPLATE_ID}`, '?status=QUEUED', '?status=PROCESSING', '?page_size=100', '?created_after=2000-01-01']) {
      const res = await a({ method: 'GET', url: `/api/v1/platform-templates/bulk-sends/${qs}` });
      expect([200, 404]).toContain(res.statusCode);
      expectNoB(res.body);
    }
  });

  it('messages/{message_id}/ of B\'s message: 403 {error} with nothing of B', async () => {
    const res = await a({ method: 'GET', url: `/api/v1/platform-templates/messages/${encodeURIComponent(bMessage)}/` });
    expect(res.statusCode).toBe(403);
    expect(JSON.parse(res.body)).toEqual({ error: expect.any(String) });
    expectNoB(res.body);
  });

  it('contact-lookup and external/contacts with B\'s phones: not found for A', async () => {
    for (const phone of [B_CONTACT.phone, B_CONTACT.phone.slice(1), ...B_BULK_PHONES, B_SEND_PHONE]) {
      const lookup = await a({ method: 'GET', url: `/api/v1/contact-lookup/?phone=${encodeURIComponent(phone)}` });
      expect(lookup.statusCode).toBe(200);
      expect(lookup.json()).toMatchObject({ found: false, contact: null, hasReplied: false });
      const ext = await a({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}` });
      expect(ext.statusCode).toBe(200);
      expect(ext.json()).toEqual({ found: false, contact: null });
    }
  });

  it('upsert with B\'s phone creates A\'s own contact; B\'s list id is refused; B\'s contact is unchanged', async () => {
    const created = await a({ method: 'POST', url: '/api/v1/external/contacts/upsert/', payload: { phone: B_CONTACT.phone, full_name: 'Alguien de A' } });
    expect(created.statusCode).toBe(201);
    expect(created.json().contact.id).not.toBe(bContactId);
    expectNoB(created.body, [B_CONTACT.phone.slice(1)]); // A sent that phone itself
    const list = await a({ method: 'POST', url: '/api/v1/external/contacts/upsert/', payload: { phone: '+5491155557777', contact_list_id: 21 } });
    expect(list.statusCode).toBe(400);
    expectNoB(list.body);
    const bView = await b({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(B_CONTACT.phone)}` });
    expect(bView.json().contact).toMatchObject({ id: bContactId, full_name: B_CONTACT.fullName });
  });

  it('send and send-bulk with B\'s number or template: 404, nothing recorded', async () => {
    for (const [number, template] of [[B_NUMBER, 'stock_alert'], [B_NUMBER, 'appointment_reminder'], ['109876543210001', 'stock_alert']]) {
      const send = await a({ method: 'POST', url: '/api/v1/platform-templates/send/', payload: { phone_number_id: number, template_name: template, recipient_phone: '+5491155550009', variables: { product: 'x' } } });
      expect(send.statusCode).toBe(404);
      expectNoB(send.body, [number, template]);
      const bulk = await a({ method: 'POST', url: '/api/v1/platform-templates/send-bulk/', payload: { phone_number_id: number, template_name: template, recipients: [{ phone: '+5491155550009', variables: { product: 'x' } }] } });
      expect(bulk.statusCode).toBe(404);
      expectNoB(bulk.body, [number, template]);
    }
  });

  it('export of B\'s company with A\'s key: 403 COMPANY_ACCESS_DENIED, also inside a list', async () => {
    for (const ids of ['202', '101,202', '202,101']) {
      const res = await a({ method: 'GET', url: `/api/v1/qualitative-export/messages?company_id=${ids}&from=2026-01-01&to=2026-01-31` });
      expect(res.statusCode).toBe(403);
      expect(JSON.parse(res.body)).toEqual({ error: { code: 'COMPANY_ACCESS_DENIED', message: expect.any(String) } });
      expectNoB(res.body);
    }
  });

  it('A\'s own export carries no record of B', async () => {
    const res = await a({ method: 'GET', url: '/api/v1/qualitative-export/messages?company_id=101&from=2026-01-01&to=2026-01-31' });
    expect(res.statusCode).toBe(200);
    expectNoB(res.body);
  });
});
