import { fanOutBatch } from '../../src/workers/webhook-fanout';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';
import type { Position } from '../../src/ports/event-store';

// Regression review 13. The fan-out passes over an unreadable event of a type it never turns into a webhook
// (fd21e2a, docs/webhooks.md "Delivery"), but before it queues a batch it waits (30 s) for the read models it builds
// webhooks from (webhook endpoints, sends, bulk) to pass the batch's end. One of those read models stops just before
// an unreadable event of a type it handles (a send's request, a number's registration, ...), so a batch holding one
// never passed: each try waited 30 s and failed, and the webhooks of the events before it (any client's) were never
// queued. The fan-out now stops just before such an event as it does before one it fans out.

describe('regress-review13: the fan-out and an unreadable event its read models stop at', () => {
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
    return (res.json() as { message_id?: string; id?: string });
  };
  const deliveries = async (endpointId: string) =>
    (await t.db.pool.query<{ event_type: string }>('SELECT event_type FROM webhooks.deliveries WHERE endpoint_id = $1', [endpointId])).rows.map((r) => r.event_type);
  const checkpoint = async () =>
    (await t.db.pool.query<{ position: string }>(`SELECT position FROM webhooks.fanout_checkpoint WHERE name = 'fanout'`)).rows[0].position as Position;

  it("queues the webhooks before a send's unreadable request, then stops just before it", async () => {
    const ep = await register('/before-unreadable-request');
    await t.db.pool.query(`INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ('fanout', '') ON CONFLICT DO NOTHING`);

    // a send (message.sent for the endpoint), then a send's request no version of this schema reads (the sends read
    // model, which the fan-out builds message webhooks from, stops just before it; the fan-out never fans it out)
    await send('+5491155550211');
    await poison('TemplateSendRequested', 'send-unreadable-request');
    // both readable (the log is read below the cluster's oldest running transaction): the request comes after the send
    await waitUntil(async () => {
      const batch = await t.services.runner.reader.readAll(await checkpoint(), 10_000);
      return batch.events.some((e) => e.streamId === 'send-unreadable-request');
    }, 90_000, 'the unreadable request to be readable');

    // one batch: the send's webhook is queued (it waited 30 s for the sends read model and failed, every time)
    const fanned = await fanOutBatch(t.services, 1000, {}).then((n) => n, (err: Error) => err);
    expect(fanned).toEqual(expect.any(Number));
    expect(await deliveries(ep.id)).toEqual(['message.sent']);
    // then it stops just before the request, and says why
    const before = await checkpoint();
    await expect(fanOutBatch(t.services, 1000, {})).rejects.toThrow(/TemplateSendRequested, stream send-unreadable-request\) cannot be read/);
    expect(await checkpoint()).toBe(before);
    expect(await deliveries(ep.id)).toEqual(['message.sent']);
  }, 240_000);
});
