import { seedFixture } from '../../src/commands/provisioning/seed';
import { webhookIdOf } from '../../src/commands/webhook-endpoint/payload';
import { fanOutBatch } from '../../src/workers/webhook-fanout';
import { BULK_CO, bulkFixture } from '../support/bulk';
import { createTestApp } from '../support/services';
import { eventually, waitUntil } from '../support/sends';

// Regression review 13. The fan-out stops just before an event of a type it fans out that its schema refuses
// (fd21e2a, fe2801b: upToUnreadable). When that event was inside a contact upsert (one append of the contact's
// stream: ContactCreated and a CustomFieldValueSet per field, one contact.upserted), the batch was cut inside the
// upsert: a contact.upserted made of its first events was queued and the checkpoint passed them; once the event could
// be read, a second contact.upserted (created: false, another webhook-id) was made of the rest. One upsert, two
// webhooks, the first without the field. The cut now backs off to the upsert's first event (docs/webhooks.md).

const PLAN_FIELD = { id: 9701, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold'], required: false, group: null };
const TIER_FIELD = { id: 9702, key: 'tier', name: 'Tier', fieldType: 'selector', options: ['a', 'b'], required: false, group: null };

describe('regress-review13: an unreadable event inside a contact upsert', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    const fixture = bulkFixture();
    fixture.companies[0].contactLists[0].customFields = [PLAN_FIELD, TIER_FIELD];
    await seedFixture(t.services, fixture, { actor: 'test' });
    await t.db.pool.query(`INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ('fanout', '') ON CONFLICT DO NOTHING`);
  });
  afterAll(async () => {
    await t?.close();
  });

  const api = (url: string, body: unknown) => t.app.inject({ method: 'POST', url, headers: { 'x-api-key': BULK_CO.key }, payload: body as object });
  const deliveries = async (endpointId: string) =>
    (await t.db.pool.query<{ webhook_id: string; payload: string }>(
      'SELECT webhook_id, payload FROM webhooks.deliveries WHERE endpoint_id = $1 ORDER BY created_at, webhook_id', [endpointId],
    )).rows;

  it('queues no partial contact.upserted, and exactly one once the event can be read', async () => {
    const reg = await api('/api/v1/webhook-endpoints/', { url: 'http://127.0.0.1:9/hooks', event_types: ['contact.upserted'] });
    expect(reg.statusCode).toBe(201);
    const endpointId = (reg.json() as { id: string }).id;

    const res = await api('/api/v1/external/contacts/upsert/', {
      phone: '+5491177790001', custom_fields: [{ key: 'plan', value: ['gold'] }, { key: 'tier', value: ['b'] }],
    });
    expect(res.statusCode).toBe(201);
    const contactId: number = res.json().contact?.id ?? res.json().id;
    const events = await t.db.pool.query<{ event_id: string; type: string; key: string | null }>(
      `SELECT event_id, type, data->>'key' AS key FROM es.events WHERE (data->>'contactId')::int = $1 AND stream_id LIKE 'contact-%'
        ORDER BY stream_revision`, [contactId],
    );
    expect(events.rows.map((r) => r.type)).toEqual(['ContactCreated', 'CustomFieldValueSet', 'CustomFieldValueSet']);
    const tier = events.rows.find((r) => r.key === 'tier')!;
    // the upsert's last event, as a version with another schema would have stored it: this one refuses it on read
    await t.db.pool.query(`UPDATE es.events SET data = data || '{"addedByAnotherVersion": true}' WHERE event_id = $1`, [tier.event_id]);

    // fan out until it stops on that event (the log is read below the cluster's oldest running transaction)
    const refusal = await waitUntil(
      () => fanOutBatch(t.services, 1000, {}).then(() => false as const, (err: Error) => err),
      90_000, 'the fan-out to reach the unreadable event',
    );
    expect(refusal.message).toMatch(/CustomFieldValueSet, stream contact-.*cannot be read/);
    await expect(fanOutBatch(t.services, 1000, {})).rejects.toThrow(/cannot be read/);
    // nothing of the upsert was fanned out: no webhook without its field
    expect(await deliveries(endpointId)).toEqual([]);

    // a version that can read it runs (here: the event readable again): one contact.upserted, whole, with the
    // webhook-id of the upsert's first event
    await t.db.pool.query(`UPDATE es.events SET data = data - 'addedByAnotherVersion' WHERE event_id = $1`, [tier.event_id]);
    const created = events.rows[0];
    const queued = await eventually(async () => {
      while ((await fanOutBatch(t.services, 1000, {})) > 0);
      return (await deliveries(endpointId)).length;
    }, 1, 60_000);
    expect(queued).toBe(1);
    while ((await fanOutBatch(t.services, 1000, {})) > 0);
    const rows = await deliveries(endpointId);
    expect(rows).toHaveLength(1);
    expect(rows[0].webhook_id).toBe(webhookIdOf(created.event_id));
    expect(JSON.parse(rows[0].payload)).toEqual({
      type: 'contact.upserted', timestamp: expect.any(String),
      data: {
        contact_id: contactId, created: true, profile_changed: true,
        versioned_custom_fields: [
          { custom_field_id: PLAN_FIELD.id, key: 'plan', version: 1, value: ['gold'] },
          { custom_field_id: TIER_FIELD.id, key: 'tier', version: 1, value: ['b'] },
        ],
      },
    });
  }, 240_000);
});
