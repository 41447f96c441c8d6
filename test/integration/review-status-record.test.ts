import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { postWebhook, SHOP, sendsFixture, statusBody, waitUntil } from '../support/sends';
import { startWebhookPipeline } from '../support/webhook-receiver';

// Review of the single send's status record (docs/sends.md, "Status record"): a provider failure always says why,
// and each message.* webhook carries what the record shows. Real app, Postgres, consumer, fan-out, sender and
// receiver.
//
// The times of delivered, read and failed are the provider's, as it stamped them (whole seconds, its clock); sent_at
// is ours. They are shown as said, never adjusted (docs/sends.md, "Status record"): an out-of-order stream keeps
// its states monotonic, not its clocks.

const SENT = '2026-03-01T10:00:00.500Z'; // every send of this suite is recorded at this instant
const T5 = '2026-03-01T10:00:05.000Z';
const T9 = '2026-03-01T10:00:09.000Z';

describe('review: status record timestamps and failure fields', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let pipeline: Awaited<ReturnType<typeof startWebhookPipeline>>;
  let recipient = 0;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(SENT), env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    pipeline = await startWebhookPipeline(t.services);
    const res = await api('POST', '/api/v1/webhook-endpoints/', {
      url: pipeline.receiver.url('/status'), event_types: ['message.sent', 'message.delivered', 'message.read', 'message.failed'],
    });
    expect(res.statusCode).toBe(201);
  });
  afterAll(async () => {
    await pipeline?.stop();
    await t?.close();
  });

  const api = (method: 'GET' | 'POST', url: string, body?: unknown) =>
    t.app.inject({ method, url, headers: { 'x-api-key': SHOP.key }, ...(body === undefined ? {} : { payload: body as object }) });
  const send = async () => {
    const res = await api('POST', '/api/v1/platform-templates/send/', {
      phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: `+54911555507${String(recipient++).padStart(2, '0')}`,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().sent_at).toBe(SENT);
    return res.json().message_id as string;
  };
  const statuses = async (id: string, list: Array<[string, string, object?]>) => {
    for (const [s, at, extra] of list) {
      expect((await postWebhook(t.app, statusBody(SHOP.number.phoneNumberId, id, s as 'delivered', at, extra))).statusCode).toBe(200);
    }
  };
  const record = async (id: string) => (await api('GET', `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`)).json();
  /** the message.* webhooks of `id` once `types` all arrived (and nothing more came), in transition order */
  const webhooks = async (id: string, types: string[]) => {
    const of = () => pipeline.receiver.received.map((r) => JSON.parse(r.body)).filter((b) => b.data.meta_message_id === id);
    await waitUntil(async () => types.every((type) => of().some((b) => b.type === type)), 20_000, types.join(', '));
    await new Promise((r) => setTimeout(r, 300)); // nothing more arrives
    const order = ['message.sent', 'message.delivered', 'message.read', 'message.failed'];
    return of().sort((a, b) => order.indexOf(a.type) - order.indexOf(b.type));
  };
  const nothingAfter = { read_at: null, failed_at: null, error_code: null, error_message: null };

  it('a read stamped before the delivered it follows: the state is read, and each time is the one the provider gave', async () => {
    const id = await send();
    await statuses(id, [['delivered', T9], ['read', T5]]);
    const bodies = await webhooks(id, ['message.sent', 'message.delivered', 'message.read']);
    const rec = await record(id);
    expect(rec.delivery_status).toEqual({ current: 'read', sent_at: SENT, delivered_at: T9, read_at: T5, failed_at: null, error_code: null, error_message: null });
    expect(bodies[1].data.delivery_status).toEqual({ current: 'delivered', sent_at: SENT, delivered_at: T9, ...nothingAfter });
    expect(bodies[2].data).toEqual(rec);
  });

  it("a failure always says why: the provider's code when it gave no message, else 'failed' (as a bulk message item)", async () => {
    const coded = await send();
    const bare = await send();
    await statuses(coded, [['failed', T5, { errors: [{ code: 131026 }] }]]);
    await statuses(bare, [['failed', T5, { errors: [] }]]);
    for (const [id, code, message] of [[coded, '131026', 'provider error 131026'], [bare, null, 'failed']] as const) {
      const bodies = await webhooks(id, ['message.sent', 'message.failed']);
      const rec = await record(id);
      expect(rec.delivery_status).toEqual({ current: 'failed', sent_at: SENT, delivered_at: null, read_at: null, failed_at: T5, error_code: code, error_message: message });
      expect(rec.error_message).toBeNull(); // the initial send succeeded
      expect(bodies.map((b) => b.type)).toEqual(['message.sent', 'message.failed']);
      expect(bodies[1].data).toEqual(rec);
    }
  });
});
