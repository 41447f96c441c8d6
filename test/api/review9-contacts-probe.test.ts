import { createTestApp } from '../support/services';
import { KEY_101, provisionAll, testClock } from '../integration/contacts-support';

const URL_UPSERT = '/api/v1/external/contacts/upsert/';

describe('probe', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
  });
  afterAll(() => t.close());

  it('probes', async () => {
    const out: string[] = [];
    const up = async (label: string, payload: unknown, headers: Record<string, string> = {}) => {
      const r = await t.app.inject({ method: 'POST', url: URL_UPSERT, headers: { 'x-api-key': KEY_101, 'content-type': 'application/json', ...headers }, payload: typeof payload === 'string' ? payload : JSON.stringify(payload) });
      out.push(`${label}: ${r.statusCode} ${r.body.slice(0, 300)}`);
      return r;
    };
    const get = async (label: string, url: string) => {
      const r = await t.app.inject({ method: 'GET', url, headers: { 'x-api-key': KEY_101 } });
      out.push(`${label}: ${r.statusCode} ${r.body.slice(0, 300)}`);
    };
    await up('base', { phone: '+5491170009001', full_name: 'Ana', custom_fields: [{ key: 'visits', value: [1] }] });
    await up('infinity', '{"phone":"+5491170009001","custom_fields":[{"key":"balance","value":[1e400]}]}');
    await up('custom_field_id huge', { phone: '+5491170009001', custom_fields: [{ custom_field_id: 1e300, value: [1] }] });
    await up('custom_field_id 2^31', { phone: '+5491170009001', custom_fields: [{ custom_field_id: 2147483648, value: [1] }] });
    await up('list id 2^31', { phone: '+5491170009002', contact_list_id: 2147483648 });
    await up('list id 2^53-1', { phone: '+5491170009002', contact_list_id: 9007199254740991 });
    await up('expires number', { phone: '+5491170009001', custom_fields: [{ key: 'visits', value: [2], expires_at: 5 }] });
    await up('key object', { phone: '+5491170009001', custom_fields: [{ key: { a: 1 }, value: [2] }] });
    await up('value nested', { phone: '+5491170009001', custom_fields: [{ key: 'visits', value: [[2]] }] });
    await up('value bool', { phone: '+5491170009001', custom_fields: [{ key: 'visits', value: [true] }] });
    await up('nul in name', { phone: '+5491170009001', full_name: 'a\u0000b' });
    await up('lone surrogate', '{"phone":"+5491170009001","full_name":"a\\ud800b"}');
    await up('nul in key', { phone: '+5491170009001', custom_fields: [{ key: 'vis\u0000its', value: [2] }] });
    await up('source null', { phone: '+5491170009001', source: null });
    await up('body array', [1]);
    await up('body null', 'null');
    await up('body string', '"x"');
    await up('phone array', { phone: ['+5491170009001'] });
    await up('phone 40 chars', { phone: '+54 9 11 7000 9001                     ' });
    await up('datetime frac9', { phone: '+5491170009001', custom_fields: [{ key: 'last_purchase', value: ['2026-01-10T12:00:00.123456789Z'] }] });
    await up('datetime basic offset', { phone: '+5491170009001', custom_fields: [{ key: 'last_purchase', value: ['2026-01-10T12:00:00+0300'] }] });
    await up('expires basic offset', { phone: '+5491170009001', custom_fields: [{ key: 'visits', value: [5], expires_at: '2026-12-10T12:00:00+0300' }] });
    await up('expires lower z', { phone: '+5491170009001', custom_fields: [{ key: 'visits', value: [6], expires_at: '2026-12-10T12:00:00z' }] });
    await up('date 0000-02-29', { phone: '+5491170009001', custom_fields: [{ key: 'next_visit', value: ['0000-02-29'] }] });
    await up('email unicode', { phone: '+5491170009001', email: 'ñ@ex.com' });
    await up('url weird', { phone: '+5491170009001', profile_picture: 'http://[::1]/' });
    await up('long key', { phone: '+5491170009001', custom_fields: [{ key: 'x'.repeat(100000), value: [1] }] });
    await up('many items', { phone: '+5491170009001', custom_fields: Array.from({ length: 5000 }, () => ({ key: 'visits', value: [1] })) });
    await up('mixed case dup', { phone: '+5491170009001', fullName: 'x', full_name: 'y' });
    await up('extra item key', { phone: '+5491170009001', custom_fields: [{ key: 'visits', value: [1], __proto__: 1 }] });
    await up('proto body', '{"phone":"+5491170009001","__proto__":{"x":1}}');
    await up('constructor key', '{"phone":"+5491170009001","constructor":{"x":1}}');
    await up('idem key', { phone: '+5491170009003' }, { 'idempotency-key': 'k1' });
    await up('idem key replay other body', { phone: '+5491170009004' }, { 'idempotency-key': 'k1' });
    await get('lookup dup phone', '/api/v1/contact-lookup/?phone=1&phone=2');
    await get('get dup phone', '/api/v1/external/contacts/?phone=1&phone=2');
    await get('lookup nul', '/api/v1/contact-lookup/?phone=%00');
    await get('lookup surrogate', '/api/v1/contact-lookup/?phone=%ED%A0%80');
    await get('lookup long', `/api/v1/contact-lookup/?phone=${'1'.repeat(5000)}`);
    await get('get 15', '/api/v1/external/contacts/?phone=011%2015%207000-9001');
    await get('get +54 11', '/api/v1/external/contacts/?phone=%2B54%2011%207000%209001');
    await get('get 54911 no plus', '/api/v1/external/contacts/?phone=5491170009001');
    console.log(out.join('\n'));
  });
});
