import { seedFixture } from '../../src/commands/provisioning/seed';
import { START } from '../../src/ports/event-store';
import { conversationsProjection } from '../../src/projections/conversations/projection';
import { checksumProjection } from '../../src/projections/rebuild';
import { anonymizeId } from '../../src/shared/anonymize';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, waitForBulk } from '../support/bulk';
import { settle } from '../support/conversation-fixtures';
import { chunksOf, fillProjection } from '../support/projections';
import { createTestApp, TEST_ANON_SECRET } from '../support/services';

// A bulk send's dispatched recipients are in the chat-history export as outbound template messages, exactly
// like a single send's; refused recipients are not. Live, rebuilt and batch-applied read models agree.

type T = Awaited<ReturnType<typeof createTestApp>>;
const BASE = '/api/v1/platform-templates';
const T0 = '2026-03-01T10:00:00.000Z';
const NUMBER = BULK_CO.unlimited.phoneNumberId;
const a = (kind: 'message' | 'conversation', id: string) => anonymizeId(TEST_ANON_SECRET, BULK_CO.companyId, kind, id);

describe('bulk sends in the export', () => {
  let t: T;
  let lines: any[];
  let sentIds: Map<string, string>; // recipient phone → provider message id
  let singleId: string;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(T0) });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
    const headers = { 'x-api-key': BULK_CO.key };
    const single = await t.app.inject({
      method: 'POST', url: `${BASE}/send/`, headers,
      payload: { phone_number_id: NUMBER, template_name: 'order_update', recipient_phone: '+5491155550009',
        variables: { name: 'Eva' }, button_variables: { button_0: 'S-9' } },
    });
    expect(single.statusCode).toBe(200);
    singleId = single.json().message_id;
    const bulk = await t.app.inject({
      method: 'POST', url: `${BASE}/send-bulk/`, headers,
      payload: {
        phone_number_id: NUMBER, template_name: 'order_update',
        recipients: [
          { phone: '+5491155550001', variables: { name: 'Ana' }, button_variables: { button_0: 'A-1' } },
          { phone: '+5491170090000', variables: { name: 'Ivo' }, button_variables: { button_0: 'A-2' } }, // the sandbox refuses it
          { phone: '+5491155550003', variables: { name: 'Luz' }, button_variables: { button_0: 'A-3' } },
        ],
      },
    });
    expect(bulk.statusCode).toBe(202);
    const bulkId = bulk.json().bulk_send_id;
    const dispatcher = new BulkDispatcher(t.services, { pollMs: 20, sleep: async () => undefined });
    dispatcher.start();
    try {
      await waitForBulk(t.db.pool, BULK_CO.companyId, bulkId, (b) => b.status === 'PARTIAL');
    } finally {
      await dispatcher.stop();
    }
    const messages = (await t.app.inject({ method: 'GET', url: `${BASE}/bulk-sends/${bulkId}/messages/?status=sent`, headers })).json();
    sentIds = new Map(messages.results.map((m: { recipient_phone: string; meta_message_id: string }) => [m.recipient_phone, m.meta_message_id]));
    expect([...sentIds.keys()].sort()).toEqual(['+5491155550001', '+5491155550003']);
    await settle(t.services);
    const res = await t.app.inject({
      method: 'GET', url: '/api/v1/qualitative-export/messages', headers,
      query: { company_id: String(BULK_CO.companyId), from: '2026-03-01T00:00:00Z', to: '2026-03-02T00:00:00Z' },
    });
    expect(res.statusCode).toBe(200);
    lines = res.body.trim().split('\n').map((l) => JSON.parse(l));
  }, 60_000);
  afterAll(() => t?.close());

  const outbound = (providerMessageId: string, digits: string, text: string) => ({
    message_id: a('message', providerMessageId),
    conversation_id: a('conversation', `msgapp-${NUMBER}-${digits}`),
    occurred_at: T0,
    channel: 'PROVIDER_MSGAPP',
    direction: 'outbound',
    author: { type: 'system', id: null, display_name: null },
    agent: null,
    content: { type: 'notification_template', text, media_url: null, media_mime: null },
    context: { reply_to_message_id: null, thread_position: null },
    metadata: { client_id: expect.stringMatching(/^cmp_[0-9a-f]{24}$/), company_id: BULK_CO.companyId, exported_at: T0, schema_version: '1.0' },
    classifications: [],
  });

  it('exports each dispatched recipient as an outbound template message, as a single send; not the refused one', () => {
    expect(lines).toHaveLength(3);
    const byId = new Map(lines.map((l) => [l.message_id, l]));
    expect(byId.get(a('message', singleId))).toEqual(outbound(singleId, '5491155550009', '[template order_update (es)]'));
    expect(byId.get(a('message', sentIds.get('+5491155550001')!))).toEqual(
      outbound(sentIds.get('+5491155550001')!, '5491155550001', '[template order_update (es)]'),
    );
    expect(byId.get(a('message', sentIds.get('+5491155550003')!))).toEqual(
      outbound(sentIds.get('+5491155550003')!, '5491155550003', '[template order_update (es)]'),
    );
    expect(JSON.stringify(lines)).not.toContain('Ivo');
  });

  it('keeps no recipient variables once every recipient has its outcome', async () => {
    const { rows } = await t.db.pool.query('SELECT count(*)::int AS n FROM rm_conversations.bulk_pending');
    expect(rows[0].n).toBe(0);
  });

  it('a rebuild, every batch size and a redelivered batch give the live rows', async () => {
    const log = (await t.services.store.readAll(START, 100_000)).events;
    expect(log.some((e) => e.type === 'BulkRecipientsDispatched')).toBe(true);
    const live = await checksumProjection(t.db.pool, conversationsProjection);
    for (const size of [1, 2, 5, log.length]) {
      const batches = chunksOf(log, size);
      batches.splice(Math.floor(batches.length / 2), 0, batches[Math.floor(batches.length / 3)]); // one batch again, later
      batches.push(...batches.filter((b) => b.some((e) => e.type === 'BulkRecipientsAdded'))); // recipients again, after their outcomes
      await fillProjection(t.db.pool, conversationsProjection, 'rm_conversations__bulk_check', batches);
      expect(await checksumProjection(t.db.pool, conversationsProjection, 'rm_conversations__bulk_check')).toBe(live);
    }
  }, 60_000);
});
