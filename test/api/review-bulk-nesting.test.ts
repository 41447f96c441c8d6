import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CO, bulkFixture } from '../support/bulk';
import { createTestApp } from '../support/services';

// Review of bulk sends (2026-11-27): a recipient's variable value nested thousands of levels deep (in a key of a
// CURRENCY object that the components builder ignores) answered 500; it is a 400 naming the recipient
// (docs/bulk.md, "Creation").

const BASE = '/api/v1/platform-templates';
const T0 = new Date('2026-03-01T10:00:00.000Z');

describe('send-bulk: deeply nested variables', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => T0 });
    const fixture = bulkFixture();
    fixture.companies[0].phoneNumbers[0].templates.push({
      id: 5198, name: 'price_alert', language: 'es', category: 'MARKETING', status: 'APPROVED', buttons: [],
      variables: [{ name: 'price', type: 'CURRENCY', position: 1, isRequired: true, component: 'BODY' }],
    });
    await seedFixture(t.services, fixture, { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const send = (price: string) => t.app.inject({
    method: 'POST', url: `${BASE}/send-bulk/`, headers: { 'x-api-key': BULK_CO.key, 'content-type': 'application/json' },
    payload: `{"phone_number_id":"${BULK_CO.unlimited.phoneNumberId}","template_name":"price_alert","recipients":[` +
      `{"phone":"+5491155550001","variables":{"price":{"amount":10,"code":"ARS"}}},{"phone":"+5491155550002","variables":{"price":${price}}}]}`,
  });
  const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

  it('answers 400 naming the recipient, not 500, and stores nothing', async () => {
    const before = (await t.db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows[0].n;
    const deep = await send(`{"amount":10,"code":"ARS","note":${nested(31)}}`);
    expect({ status: deep.statusCode, body: deep.json() }).toEqual({
      status: 400, body: { recipients: ['recipients[1].variables: nested too deeply (at most 32 levels of objects and lists).'] },
    });
    // deeper than any body may nest (src/http/app.ts): refused before the route runs, in the same field-error shape
    const deeper = await send(`{"amount":10,"code":"ARS","note":${nested(10_000)}}`);
    expect({ status: deeper.statusCode, body: deeper.json() }).toEqual({
      status: 400, body: { body: ['nested too deeply (at most 64 levels of objects and lists)'] },
    });
    expect((await t.db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows[0].n).toBe(before);
  });

  it('accepts the nesting a variable really has, up to the limit', async () => {
    const res = await send(`{"amount":10,"code":"ARS","note":${nested(30)}}`);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ unique_recipients: 2 });
  });
});
