import { seedFixture } from '../../src/commands/provisioning/seed';
import { webhookIdOf } from '../../src/commands/webhook-endpoint/payload';
import { fanOutBatch } from '../../src/workers/webhook-fanout';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { BULK_CO, bulkFixture } from '../support/bulk';
import { createTestApp } from '../support/services';
import { waitUntil } from '../support/sends';
import { startReceiver } from '../support/webhook-receiver';

// The fan-out's batches end with whole contact upserts (docs/webhooks.md, "Fan-out"): one contact.upserted per
// upsert, with its webhook-id and body, whatever the batch size. Real app, Postgres, fan-out batches, sender, receiver.

const PLAN_FIELD = { id: 9601, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold'], required: false, group: null };
const TIER_FIELD = { id: 9602, key: 'tier', name: 'Tier', fieldType: 'selector', options: ['a', 'b'], required: false, group: null };

describe('webhook fan-out batches and contact upserts', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let sender: { stop(): Promise<void> };

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    const fixture = bulkFixture();
    fixture.companies[0].contactLists[0].customFields = [PLAN_FIELD, TIER_FIELD];
    await seedFixture(t.services, fixture, { actor: 'test' });
    receiver = await startReceiver();
    await t.db.pool.query(`INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ('fanout', '') ON CONFLICT DO NOTHING`);
    sender = startWebhookSender(t.services, { pollMs: 20 });
  });
  afterAll(async () => {
    await sender?.stop();
    await receiver?.close();
    await t?.close();
  });

  const api = (method: 'POST', url: string, body: unknown) =>
    t.app.inject({ method, url, headers: { 'x-api-key': BULK_CO.key }, payload: body as object });
  const register = async (path: string) => {
    expect((await api('POST', '/api/v1/webhook-endpoints/', { url: receiver.url(path), event_types: ['contact.upserted'] })).statusCode).toBe(201);
  };
  const upsert = async (phone: string, plan: string, tier: string): Promise<number> => {
    const res = await api('POST', '/api/v1/external/contacts/upsert/', { phone, custom_fields: [{ key: 'plan', value: [plan] }, { key: 'tier', value: [tier] }] });
    expect(res.statusCode).toBe(201);
    return res.json().contact?.id ?? res.json().id;
  };
  const fanOutAll = async (batchSize: number) => {
    while ((await fanOutBatch(t.services, batchSize)) > 0);
  };
  const received = (path: string) => receiver.received.filter((r) => r.path === path);
  const createdBody = (contactId: number, plan: string, tier: string) => ({
    type: 'contact.upserted', timestamp: expect.any(String),
    data: {
      contact_id: contactId, created: true, profile_changed: true,
      versioned_custom_fields: [
        { custom_field_id: PLAN_FIELD.id, key: 'plan', version: 1, value: [plan] },
        { custom_field_id: TIER_FIELD.id, key: 'tier', version: 1, value: [tier] },
      ],
    },
  });

  // each upsert below appends four events, first after the checkpoint: its phone's claim (another stream), then
  // ContactCreated and a CustomFieldValueSet per field (one contact.upserted)
  it.each([
    ['an upsert longer than the batch is read to its end', 1, 1],
    ['a batch full in the middle of an upsert stops before it, and the next batch reads it to its end', 2, 1],
    ['a batch full in the middle of an upsert after another stops before it', 3, 2],
  ])('%s: one contact.upserted per upsert (batches of %i)', async (_, batchSize, upserts) => {
    const path = `/upserts-${batchSize}`;
    await register(path);
    await fanOutAll(1000); // the log so far
    const contacts: Array<{ id: number; plan: string; tier: string }> = [];
    for (let i = 0; i < upserts; i++) {
      const [plan, tier] = i % 2 === 0 ? ['gold', 'a'] : ['basic', 'b'];
      contacts.push({ id: await upsert(`+54911777${batchSize}000${i}`, plan, tier), plan, tier });
    }
    await fanOutAll(batchSize);
    await waitUntil(async () => received(path).length >= upserts, 10_000, 'the contact.upserted webhooks');
    await new Promise((r) => setTimeout(r, 300)); // nothing more arrives
    const bodies = received(path).map((r) => JSON.parse(r.body));
    expect(bodies.sort((a, b) => a.data.contact_id - b.data.contact_id)).toEqual(contacts.map((c) => createdBody(c.id, c.plan, c.tier)));
    // the webhook-id of each is its upsert's first event's (ContactCreated): the same whatever the batch size
    const created = await t.db.pool.query<{ event_id: string }>(
      `SELECT event_id FROM es.events WHERE type = 'ContactCreated' AND (data->>'contactId')::int = ANY($1::int[])`, [contacts.map((c) => c.id)],
    );
    expect(created.rows).toHaveLength(upserts);
    expect(received(path).map((r) => r.headers['webhook-id']).sort()).toEqual(created.rows.map((r) => webhookIdOf(r.event_id)).sort());
  });
});
