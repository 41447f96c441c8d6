import { contactStreamId } from '../../src/commands/contact/decider';
import { upsertUnlocked } from '../../src/commands/contact/handler';
import { parseUpsertBody } from '../../src/commands/contact/upsert-input';
import { buildApp } from '../../src/http/app';
import { createTestApp } from '../support/services';
import { KEY_101, provisionAll } from './contacts-support';

// Review 9: concurrent upserts of one existing contact that change different things (profile fields, custom fields,
// a clear), through two apps (each with its own upsert memory, as two processes have) and without the in-process
// lock: no change is lost, every field's versions are consecutive, no second contact appears.

const URL_UPSERT = '/api/v1/external/contacts/upsert/';

describe('review 9: concurrent upserts of one existing contact', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let second: Awaited<ReturnType<typeof buildApp>>;
  beforeAll(async () => {
    t = await createTestApp();
    await provisionAll(t.services);
    second = await buildApp(t.services);
    await second.ready();
  });
  afterAll(async () => {
    await second?.close();
    await t.close();
  });

  const changes = (phone: string) => [
    { phone, full_name: 'Ana Paz' },
    { phone: phone.replace('+549', '+54 '), email: 'ana@example.com' },
    { phone, custom_fields: [{ key: 'plan', value: ['gold'] }] },
    { phone, custom_fields: [{ key: 'visits', value: [7] }] },
    { phone, custom_fields: [{ key: 'nickname', value: [] }] },
    { phone, custom_fields: [{ key: 'allergies', value: ['pollen', 'latex'] }] },
    { phone, source_detail: 'fair' },
    { phone, custom_fields: [{ key: 'notes', value: ['n'] }] },
  ];

  async function expectAllKept(phone: string) {
    const got = (await t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } })).json();
    expect(got.found).toBe(true);
    const c = got.contact;
    expect([c.full_name, c.email, c.source_detail]).toEqual(['Ana Paz', 'ana@example.com', 'fair']);
    const byKey = Object.fromEntries(c.custom_fields.map((f: any) => [f.key, [f.value, f.version]]));
    expect(byKey).toMatchObject({
      plan: [['gold'], 2], visits: [[7], 2], nickname: [null, 2], allergies: [['latex', 'pollen'], 1], notes: [['n'], 1],
    });
    const events = await t.services.store.readStream(contactStreamId(101, c.id));
    for (const fieldId of [501, 502, 511]) {
      const versions = events.filter((e) => e.type.startsWith('CustomFieldValue') && (e.data as any).fieldId === fieldId).map((e) => (e.data as any).version);
      expect(versions).toEqual([1, 2]);
    }
  }

  const create = async (phone: string) => {
    const r = await t.app.inject({
      method: 'POST', url: URL_UPSERT, headers: { 'x-api-key': KEY_101 },
      payload: { phone, custom_fields: [{ key: 'plan', value: ['basic'] }, { key: 'visits', value: [1] }, { key: 'nickname', value: ['an'] }] },
    });
    expect(r.statusCode).toBe(201);
  };

  it('through two apps at once', async () => {
    const phone = '+5491170039001';
    await create(phone);
    // both apps remember the number (the second one from its own upsert)
    expect((await second.inject({ method: 'POST', url: URL_UPSERT, headers: { 'x-api-key': KEY_101 }, payload: { phone } })).statusCode).toBe(200);
    const responses = await Promise.all(changes(phone).map((payload, i) =>
      (i % 2 ? second : t.app).inject({ method: 'POST', url: URL_UPSERT, headers: { 'x-api-key': KEY_101 }, payload })));
    expect(responses.map((r) => r.statusCode)).toEqual(changes(phone).map(() => 200));
    await expectAllKept(phone);
  });

  it('without the in-process lock (as from several processes)', async () => {
    const phone = '+5491170039002';
    await create(phone);
    const results = await Promise.all(changes(phone).map((body) => upsertUnlocked(t.services, 101, parseUpsertBody(body), { actor: 'test', companyId: 101 })));
    expect(results.every((r) => !r.created)).toBe(true);
    await expectAllKept(phone);
  });
});
