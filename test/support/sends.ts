import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { signWebhook, statusWebhook, type StatusNotification } from '../../src/shared/provider-webhook';

// A provisioning fixture for the sends feature: two companies, numbers of different tiers, templates covering
// every variable type, a paused template, and a contact stored under a phone variant of a recipient.

export const SHOP = {
  companyId: 301,
  key: 'sbk_shop301aaaaaaaaaaaaaaaaaaaaaaaaaa',
  number: { id: 31, phoneNumberId: '200000000000031' },
  smallNumber: { id: 32, phoneNumberId: '200000000000032' },
  contact: { id: 7001, fullName: 'Ana Gomez', phone: '+541155551234' },
};
export const OTHER = {
  companyId: 302,
  key: 'sbk_other302bbbbbbbbbbbbbbbbbbbbbbbbb',
  number: { id: 33, phoneNumberId: '200000000000033' },
};
export const APP_SECRET = 'test-app-secret';
export const VERIFY_TOKEN = 'test-verify-token';

const company = (id: number, name: string, key: string, userId: number, listId: number) => ({
  id, name, email: `hola@${name.toLowerCase().replace(/\s+/g, '')}.example`, phone: '+541140000000', website: 'https://shop.example',
  address: 'Calle 1', description: name, timezone: 'America/Argentina/Buenos_Aires', companySize: 'SMALL', companyTypes: ['ECOMMERCE'],
  categories: ['Retail'],
  users: [{ id: userId, email: `ops${userId}@shop.example`, first_name: 'Op', last_name: 'Erator' }],
  apiKeys: [{ name: `${name} key`, key, userId, active: true, expiresAt: null }],
  contactLists: [{ id: listId, name: 'Clientes', isDefault: true, customFields: [] }],
  contacts: [] as unknown[],
  branches: [], holidays: [], agents: [], operators: [],
  phoneNumbers: [] as unknown[],
});

const number = (id: number, phoneNumberId: string, tier: string, templates: unknown[]) => ({
  id, phoneNumberId, displayPhoneNumber: `+54 11 ${phoneNumberId.slice(-4)}`, verifiedName: 'Shop', businessName: 'Shop SA',
  isPrimary: true, messagingLimitTier: tier, qualityRating: 'GREEN', templates,
});

export const INVOICE_TEMPLATE = {
  id: 3101, name: 'invoice_ready', language: 'es', category: 'UTILITY', status: 'APPROVED',
  variables: [
    { name: 'banner', type: 'IMAGE', position: 1, isRequired: true, component: 'HEADER' },
    { name: 'name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
    { name: 'total', type: 'CURRENCY', position: 2, isRequired: true, component: 'BODY' },
    { name: 'due', type: 'DATE_TIME', position: 3, isRequired: true, component: 'BODY' },
    { name: 'invoice', type: 'TEXT', position: 1, isRequired: true, component: 'BUTTON' },
  ],
  buttons: [{ type: 'URL', text: 'Ver factura', url: 'https://shop.example/inv/{{1}}' }, { type: 'QUICK_REPLY', text: 'Baja' }],
};

const welcome = (id: number, language = 'es', status = 'APPROVED') => ({
  id, name: 'welcome', language, category: 'MARKETING', status, variables: [], buttons: [],
});

export function sendsFixture(): any {
  const shop = company(SHOP.companyId, 'Tienda Uno', SHOP.key, 71, 3001);
  shop.contacts = [{
    id: SHOP.contact.id, contactListId: 3001, fullName: SHOP.contact.fullName, phone: SHOP.contact.phone, email: null, source: 'manual',
    sourceDetail: null, profilePicture: null, isTest: false, createdAt: '2026-01-01T00:00:00Z', customFields: [],
  }];
  shop.phoneNumbers = [
    number(SHOP.number.id, SHOP.number.phoneNumberId, 'TIER_1000', [
      INVOICE_TEMPLATE,
      welcome(3102),
      welcome(3103, 'en'),
      { ...welcome(3104), name: 'promo', status: 'PAUSED' },
    ]),
    number(SHOP.smallNumber.id, SHOP.smallNumber.phoneNumberId, 'TIER_50', [welcome(3201)]),
  ];
  const other = company(OTHER.companyId, 'Otra Tienda', OTHER.key, 72, 3002);
  other.phoneNumbers = [number(OTHER.number.id, OTHER.number.phoneNumberId, 'TIER_1000', [welcome(3301)])];
  return { companies: [shop, other], globalKeys: [] };
}

export const invoiceVariables = {
  banner: 'https://cdn.example/banner.jpg',
  name: 'Ana',
  total: { amount: 1500.75, code: 'ARS' },
  due: '2026-03-10T12:00:00-03:00',
};

/** POSTs a webhook body signed with the test app secret (or the given signature header). */
export function postWebhook(app: FastifyInstance, body: unknown, signature?: string | null) {
  const raw = JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const sig = signature === undefined ? signWebhook(APP_SECRET, raw) : signature;
  if (sig !== null) headers['x-hub-signature-256'] = sig;
  return app.inject({ method: 'POST', url: '/webhooks/provider', headers, payload: raw });
}

export const unix = (iso: string): string => String(Math.floor(Date.parse(iso) / 1000));

export function statusBody(phoneNumberId: string, providerMessageId: string, status: StatusNotification['status'], atIso: string, extra: Partial<StatusNotification> = {}) {
  return statusWebhook([{ phoneNumberId, providerMessageId, status, timestamp: unix(atIso), recipientId: '5491155551234', ...extra }]);
}

export async function countEventsOfType(pool: Pool, type: string, streamId?: string): Promise<number> {
  const r = streamId
    ? await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM es.events WHERE type = $1 AND stream_id = $2', [type, streamId])
    : await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM es.events WHERE type = $1', [type]);
  return r.rows[0].n;
}

export async function eventsOf(pool: Pool, streamId: string): Promise<Array<{ type: string; data: any; metadata: any }>> {
  const r = await pool.query('SELECT type, data, metadata FROM es.events WHERE stream_id = $1 ORDER BY stream_revision', [streamId]);
  return r.rows;
}

export async function waitUntil<T>(probe: () => Promise<T | undefined | false>, timeoutMs = 20_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Polls `read` until it returns `expected` (deep equality), then returns it; on timeout returns the last value so
 * the caller's `expect(...).toEqual(expected)` shows the difference. Read models follow the event log
 * asynchronously: tests wait for the expected state rather than for a position.
 */
export async function eventually<T>(read: () => Promise<T>, expected: T, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (JSON.stringify(v) === JSON.stringify(expected) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
}
