import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { invoiceVariables, SHOP, sendsFixture } from '../support/sends';

// A JSON body nested thousands of levels deep (in a key the route ignores, such as a CURRENCY object's extra field)
// overflowed JSON.stringify's stack further on: 500. Any body deeper than 64 levels is a 400 in the route's shape,
// and nothing is recorded (src/http/app.ts; docs/reliability.md, "Limits").

const NOW = new Date('2026-03-01T10:00:00.000Z');
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('a request body nested too deeply', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => NOW });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(() => t?.close());

  const events = async () => (await t.db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows[0].n as number;
  const post = (url: string, payload: string) =>
    t.app.inject({ method: 'POST', url, payload, headers: { 'x-api-key': SHOP.key, 'content-type': 'application/json' } });
  const sendWith = (note: string) => post('/api/v1/platform-templates/send/', JSON.stringify({
    phone_number_id: SHOP.number.phoneNumberId, template_name: 'invoice_ready', language: 'es', recipient_phone: '+5491155551234',
    variables: { ...invoiceVariables, total: { ...(invoiceVariables.total as object), note: '__NOTE__' } }, button_variables: { button_0: 'F-0001' },
  }).replace('"__NOTE__"', note));

  it('a single send: 400 {body: [...]}, no provider call, nothing recorded', async () => {
    const before = await events();
    const res = await sendWith(nested(10_000));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ body: ['nested too deeply (at most 64 levels of objects and lists)'] });
    expect(await events()).toBe(before);
  });

  it('a contact upsert and a webhook endpoint: 400 in their plain {error} shape', async () => {
    const upsert = await post('/api/v1/external/contacts/upsert/', `{"phone":"+5491155550001","custom_fields":{"x":${nested(65)}}}`);
    expect(upsert.statusCode).toBe(400);
    expect(upsert.json()).toEqual({ error: 'body: nested too deeply (at most 64 levels of objects and lists)' });
    const endpoint = await post('/api/v1/webhook-endpoints/', `{"url":"https://hooks.example/in","event_types":["message.sent"],"x":${nested(100)}}`);
    expect(endpoint.statusCode).toBe(400);
    expect(endpoint.json()).toEqual({ error: 'body: nested too deeply (at most 64 levels of objects and lists)' });
  });

  it('64 levels are still read (the route judges them)', async () => {
    const res = await sendWith(nested(60));
    expect(res.statusCode).toBe(200);
  });
});
