import { fanOutBatch } from '../../src/workers/webhook-fanout';
import { eventually, SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// An event its schema refuses on read (stored behind the service's back, by a version with another schema) stopped
// every client's webhooks: the fan-out read the log through the validating store, which fails the whole batch. It now
// reads the log as the projections do (each event upcast on its own): such an event of a type it never fans out is
// passed over; one of a type it fans out stops it just before the event (no client's webhook skipped).

describe('the webhook fan-out and an event its schema refuses', () => {
  let t: WebhookTestBed['t'];
  let register: WebhookTestBed['register'];
  useWebhookTestBed((bed) => ({ t, register } = bed));

  const poison = (type: string, stream: string) =>
    t.db.pool.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
       VALUES ($1, 0, gen_random_uuid(), $2, '{}', jsonb_build_object('eventId', gen_random_uuid(),
               'correlationId', gen_random_uuid(), 'causationId', null, 'companyId', $3::int, 'actor', 'test', 'at', now()::text))`,
      [stream, type, SHOP.companyId],
    );
  const send = async (recipient: string) => {
    const res = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: recipient },
    });
    expect(res.statusCode).toBe(200);
  };
  const drain = async () => {
    while ((await fanOutBatch(t.services, 1000, {})) > 0);
  };
  const deliveries = async (endpointId: string) =>
    (await t.db.pool.query<{ event_type: string }>('SELECT event_type FROM webhooks.deliveries WHERE endpoint_id = $1', [endpointId])).rows.map((r) => r.event_type);
  const checkpoint = async () =>
    (await t.db.pool.query<{ position: string }>(`SELECT position FROM webhooks.fanout_checkpoint WHERE name = 'fanout'`)).rows[0].position;

  it('passes over one of a type it never fans out; stops just before one of a type it fans out', async () => {
    const ep = await register('/unreadable');
    await t.db.pool.query(`INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ('fanout', '') ON CONFLICT DO NOTHING`);
    await drain();

    // a holiday (the business read model's; never a webhook) that cannot be read, then a send
    await poison('HolidayDeclared', 'company-holiday-poison');
    await send('+5491155550111');
    // the log is read only below the cluster's oldest running transaction (test databases share one cluster, and
    // other suites hold transactions open): drain until the send is readable
    expect(await eventually(async () => (await drain(), deliveries(ep.id)), ['message.sent'], 60_000)).toEqual(['message.sent']);

    // a send's acceptance that cannot be read: the fan-out stops before it, every time, and says why
    await poison('TemplateSendAccepted', 'send-poison');
    const before = await checkpoint();
    // until the poison is readable the fan-out finds nothing new (0); then it stops before it, every time
    const firstRefusal = await waitUntil(() => fanOutBatch(t.services, 1000, {}).then(
      (fanned) => (expect(fanned).toBe(0), false as const),
      (err: Error) => err,
    ), 60_000, 'the fan-out to reach the unreadable event');
    expect(firstRefusal.message).toMatch(/TemplateSendAccepted, stream send-poison\) cannot be read/);
    await expect(fanOutBatch(t.services, 1000, {})).rejects.toThrow(/TemplateSendAccepted, stream send-poison\) cannot be read/);
    await expect(fanOutBatch(t.services, 1000, {})).rejects.toThrow(/cannot be read/);
    expect(await checkpoint()).toBe(before);
    expect(await deliveries(ep.id)).toEqual(['message.sent']);
  }, 180_000);
});
