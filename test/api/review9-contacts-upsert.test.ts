import { contactPhoneStreamId } from '../../src/commands/contact/decider';
import { createTestApp } from '../support/services';
import { KEY_101, provisionAll, testClock } from '../integration/contacts-support';

// Review 9 of the upsert: bad input is a 400 in the spec's {error} shape that changes nothing.

const URL_UPSERT = '/api/v1/external/contacts/upsert/';

describe('review 9: upsert input', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  const upsert = (payload: object) =>
    t.app.inject({ method: 'POST', url: URL_UPSERT, headers: { 'x-api-key': KEY_101 }, payload });

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
  });
  afterAll(() => t.close());

  it('a contact_list_id beyond the 32-bit ids is a 400 naming it, for a new and for an existing number (was 500)', async () => {
    const fresh = '+5491170019001';
    for (const id of [2_147_483_648, 9_007_199_254_740_991]) {
      const r = await upsert({ phone: fresh, contact_list_id: id });
      expect({ status: r.statusCode, body: r.json() }).toEqual({
        status: 400, body: { error: 'contact_list_id must be an integer from 1 to 2147483647' },
      });
    }
    expect(await t.services.store.readStream(contactPhoneStreamId(101, fresh))).toEqual([]);

    const existing = '+5491170019002';
    expect((await upsert({ phone: existing, full_name: 'Ana' })).statusCode).toBe(201);
    const r = await upsert({ phone: existing, full_name: 'Changed', contactListId: 2_147_483_648 });
    expect({ status: r.statusCode, body: r.json() }).toEqual({
      status: 400, body: { error: 'contactListId must be an integer from 1 to 2147483647' },
    });
    const got = await t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(existing)}`, headers: { 'x-api-key': KEY_101 } });
    expect(got.json().contact.full_name).toBe('Ana');
  });
});
