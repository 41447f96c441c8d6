import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CO, bulkFixture } from '../support/bulk';
import { createTestApp } from '../support/services';
import { postWebhook, statusBody, waitUntil } from '../support/sends';
import { startReceiver, startWebhookPipeline } from '../support/webhook-receiver';

// A bulk recipient's status changes are decided against the bulk read model, which may lag behind the log, so the
// log can hold a change the bulk message item never shows (a `failed` after a `read` not yet projected, a `read`
// after a `failed`). The client's webhooks follow the item, as a single send's follow its status record
// (docs/webhooks.md, "Decisions"). The lag is made certain by stopping the projection runner while the statuses
// arrive; back-to-back statuses show it without that too.

const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';
const T3 = '2026-03-01T10:05:00.000Z';

describe('bulk message webhooks follow the item, not a lagging decision', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let pipeline: Awaited<ReturnType<typeof startWebhookPipeline>> | undefined;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
    pipeline = await startWebhookPipeline(t.services);
    receiver = pipeline.receiver;
  });
  afterAll(async () => {
    await pipeline?.stop();
    await t?.close();
  });

  const api = (method: 'GET' | 'POST', url: string, body?: unknown) =>
    t.app.inject({ method, url, headers: { 'x-api-key': BULK_CO.key }, ...(body === undefined ? {} : { payload: body as object }) });
  const bodies = () => receiver.received.map((r) => JSON.parse(r.body) as { type: string; data: Record<string, unknown> });

  it("a failed after a read not yet projected, and a read after a failed, reach the log but not the client", async () => {
    const reg = await api('POST', '/api/v1/webhook-endpoints/', { url: receiver.url('/bulk'), event_types: ['message.sent', 'message.delivered', 'message.read', 'message.failed'] });
    expect(reg.statusCode).toBe(201);
    const created = await api('POST', '/api/v1/platform-templates/send-bulk/', {
      phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome', recipients: [{ phone: '+5491155550011' }, { phone: '+5491155550021' }],
    });
    expect(created.statusCode).toBe(202);
    const bulkId = created.json().bulk_send_id as string;
    const sent = await waitUntil(async () => {
      const s = bodies().filter((x) => x.type === 'message.sent');
      return s.length === 2 && s.sort((x, y) => String(x.data.recipient_phone).localeCompare(String(y.data.recipient_phone)));
    }, 20_000, 'two message.sent');
    const [a, b] = sent.map((s) => s.data.meta_message_id as string);

    await t.services.runner.stop();
    const post = async (id: string, s: 'read' | 'failed', at: string) =>
      expect((await postWebhook(t.app, statusBody(BULK_CO.unlimited.phoneNumberId, id, s, at))).statusCode).toBe(200);
    await post(a, 'read', T1);
    await post(a, 'failed', T2);
    await post(b, 'failed', T1);
    await post(b, 'read', T3);
    await t.services.runner.start();

    // every status logged, then fanned out (the checkpoint at the log's head) and sent (nothing pending)
    const logged = async () => (await t.db.pool.query<{ id: string; status: string }>(
      `SELECT data->>'providerMessageId' AS id, data->>'status' AS status FROM es.events
        WHERE type = 'BulkRecipientStatusRecorded' AND stream_id LIKE $1 ORDER BY tx_id, seq`, [`bulkchunk-${bulkId}-%`])).rows;
    await waitUntil(async () => (await logged()).length >= 6, 20_000, 'the statuses logged');
    expect((await logged()).map((r) => `${r.id === a ? 'A' : 'B'} ${r.status}`)).toEqual(
      expect.arrayContaining(['A read', 'A failed', 'B failed', 'B read'])); // the log holds the changes the items do not show
    const lastStatus = (await t.db.pool.query<{ p: string }>(
      `SELECT tx_id || ':' || seq AS p FROM es.events WHERE type = 'BulkRecipientStatusRecorded' ORDER BY tx_id DESC, seq DESC LIMIT 1`)).rows[0].p;
    await waitUntil(async () => {
      const checkpoint = (await t.db.pool.query<{ position: string }>(`SELECT position FROM webhooks.fanout_checkpoint`)).rows[0]?.position;
      const pending = (await t.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhooks.deliveries WHERE status = 'pending'`)).rows[0].n;
      return checkpoint !== undefined && t.services.store.comparePositions(checkpoint as never, lastStatus as never) >= 0 && pending === 0;
    }, 20_000, 'every status fanned out and every webhook sent');

    const items = (await api('GET', `/api/v1/platform-templates/bulk-sends/${bulkId}/messages/?page_size=10`)).json().results as Array<{ meta_message_id: string; status: string }>;
    expect(items.find((m) => m.meta_message_id === a)?.status).toBe('read');
    expect(items.find((m) => m.meta_message_id === b)?.status).toBe('failed');
    const hooks = (id: string) => bodies().filter((x) => x.data.meta_message_id === id).map((x) => x.type).sort();
    expect(hooks(a)).toEqual(['message.delivered', 'message.read', 'message.sent']);
    expect(hooks(b)).toEqual(['message.failed', 'message.sent']);
  });
});
