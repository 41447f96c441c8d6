import { createTestApp } from '../support/services';
import { KEY_101, provisionAll, testClock } from '../integration/contacts-support';

// Review (contacts): unicode in profile data, custom-field values and phone numbers.

const URL_UPSERT = '/api/v1/external/contacts/upsert/';
/** U+1F600: one character, two UTF-16 code units */
const EMOJI = '\u{1F600}';

describe('contacts review: unicode', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  const upsert = (payload: unknown) =>
    t.app.inject({ method: 'POST', url: URL_UPSERT, headers: { 'x-api-key': KEY_101 }, payload: payload as object });
  const get = (phone: string) =>
    t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } });
  const lookup = (phone: string) =>
    t.app.inject({ method: 'GET', url: `/api/v1/contact-lookup/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } });

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
  });
  afterAll(() => t.close());

  it('length limits count characters, not UTF-16 code units: 255 emoji are a valid name and string value, 256 are not', async () => {
    const phone = '+5491163000001';
    const name = EMOJI.repeat(255);
    const r = await upsert({ phone, full_name: name, source_detail: EMOJI.repeat(1000), custom_fields: [{ key: 'nickname', value: [name] }] });
    expect(r.statusCode).toBe(201);
    expect(r.json().contact.fullName).toBe(name);
    expect(r.json().contact.sourceDetail).toBe(EMOJI.repeat(1000));
    expect(r.json().contact.customFields.find((f: { key: string }) => f.key === 'nickname').value).toEqual([name]);
    const g = await get(phone);
    expect(g.json().contact.full_name).toBe(name);

    // one character more is over each limit, and the message says so
    const over = await upsert({ phone, full_name: `${name}x`, source_detail: `${EMOJI.repeat(1000)}x` });
    expect(over.statusCode).toBe(400);
    expect(over.json()).toEqual({ error: 'full_name is longer than 255 characters; source_detail is longer than 1000 characters' });
    const overValue = await upsert({ phone, custom_fields: [{ key: 'nickname', value: [`${name}x`] }] });
    expect(overValue.statusCode).toBe(400);
    expect(overValue.json()).toEqual({ error: 'custom_fields[0] ("nickname"): value is longer than 255 characters' });
  });

  it('a text field holds 10,000 characters whatever their encoding', async () => {
    const r = await upsert({ phone: '+5491163000002', custom_fields: [{ key: 'notes', value: [EMOJI.repeat(10_000)] }] });
    expect(r.statusCode).toBe(201);
    expect((await upsert({ phone: '+5491163000002', custom_fields: [{ key: 'notes', value: [EMOJI.repeat(10_001)] }] })).json())
      .toEqual({ error: 'custom_fields[0] ("notes"): value is longer than 10000 characters' });
  });

  it('names and values in any script round-trip unchanged', async () => {
    const phone = '+5491163000003';
    const name = 'Zoë Ñandú 李小龍 محمد \u{1F469}\u200D\u{1F4BB}';
    const r = await upsert({ phone, full_name: name, custom_fields: [{ key: 'nickname', value: ['Señor 🌮'] }] });
    expect(r.statusCode).toBe(201);
    expect((await get(phone)).json().contact).toMatchObject({ full_name: name });
    expect((await lookup(phone)).json().contact).toMatchObject({ fullName: name });
  });

  // a number copied from a formatted document: U+2011 non-breaking hyphen, U+2013 en dash, U+2212 minus
  it('a number spelled with Unicode dashes is the same number (lookup, get, upsert)', async () => {
    const phone = '+5491163000004';
    expect((await upsert({ phone, full_name: 'Dash' })).statusCode).toBe(201);
    for (const spelling of ['+54 9 11 6300\u20110004', '+54 9 11 6300\u20130004', '+54\u20119\u201111\u20116300\u20110004', '+54 9 11 6300\u22120004']) {
      expect((await lookup(spelling)).json()).toMatchObject({ found: true, contact: { phone } });
      expect((await get(spelling)).json()).toMatchObject({ found: true, contact: { phone } });
      const u = await upsert({ phone: spelling, full_name: 'Dash' });
      expect(u.statusCode).toBe(200);
      expect(u.json()).toMatchObject({ created: false, contact: { phone }, versionedCustomFields: [] });
    }
  });
});
