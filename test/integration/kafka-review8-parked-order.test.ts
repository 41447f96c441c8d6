// Parked statuses of one provider id apply in parking order even when the sweeper's rounds separate them
// (docs/sends.md, "Delivery consumer"). A round holds `batchSize` parked statuses from a cursor; before, a round that
// began after an id's first parked status (left in an earlier round: its owner was unknown then) applied the id's
// later status alone once the owner was known: `read` before `delivered`, so the send's delivered time became the
// read time (implied), and the real delivered status was a no-op afterwards. Now a round takes every parked status
// of its ids, the earlier ones included.
import { seedFixture } from '../../src/commands/provisioning/seed';
import type { ProviderStatusUpdate } from '../../src/commands/delivery-status';
import type { MessagingProvider, SendTemplateRequest, SendTemplateResult } from '../../src/ports/provider';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import type { IncomingRecord } from '../../src/ports/transport';
import type { ProviderMessageOwner } from '../../src/projections/sends/queries';
import { statusAppliers } from '../../src/workers/delivery-consumer';
import { sweepParkedStatuses, type SweepCursor } from '../../src/workers/parked-status-sweeper';
import { parkStatuses } from '../../src/workers/parked-statuses';
import { createTestApp } from '../support/services';
import { eventsOf, SHOP, sendsFixture, unix } from '../support/sends';

const PN = SHOP.number.phoneNumberId;
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:03:00.000Z';

/** The sandbox, except that its sends get the provider id the test chose. */
class ChosenIdProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  nextId: string | undefined;
  private readonly sandbox = new SandboxProvider({ delivery: 'off' });
  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    const result = await this.sandbox.sendTemplate(request);
    return { providerMessageId: this.nextId ?? result.providerMessageId };
  }
}

const parked = (id: string, status: 'delivered' | 'read', at: string) => {
  const value = { kind: 'status', phoneNumberId: PN, status: { id, status, timestamp: unix(at), recipient_id: '5491155551299' } };
  const record = { topic: 'provider.webhooks', key: id, value, headers: {}, partition: 0, offset: '0' } as IncomingRecord;
  const update = { providerMessageId: id, status, at, timestamp: unix(at), errorCode: null, errorMessage: null } as ProviderStatusUpdate;
  return { record, update };
};

describe('parked statuses of one provider id across sweeper rounds', () => {
  const provider = new ChosenIdProvider();
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2026-03-01T10:00:00.000Z'), provider });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(() => t?.close());

  it('apply in parking order: delivered (left in an earlier round) before the read parked after it', async () => {
    const known = 'wamid.REVIEW8-ORDER';
    // delivered arrives before its send is known; two unknown ids are parked; then the read, behind the delivered
    await parkStatuses(t.db.pool, [parked(known, 'delivered', T1)]);
    await parkStatuses(t.db.pool, [parked('wamid.REVIEW8-U1', 'delivered', T1)]);
    await parkStatuses(t.db.pool, [parked('wamid.REVIEW8-U2', 'delivered', T1)]);
    await parkStatuses(t.db.pool, [parked(known, 'read', T2)]);

    const options = {
      topic: 'provider.webhooks', graceMs: 600_000, intervalMs: 10, batchSize: 2,
      apply: (owner: ProviderMessageOwner, update: ProviderStatusUpdate) => statusAppliers.get(owner.kind)!(t.services, owner, update),
      onDeadLetter: () => undefined,
    };
    const cursor: SweepCursor = { afterSeq: '0' };
    await sweepParkedStatuses(t.services, options, () => false, cursor); // the delivered: no owner yet, left

    provider.nextId = known; // now the send that owns the id is recorded
    const send = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: PN, template_name: 'welcome', recipient_phone: '+5491155551299' },
    });
    expect(send.statusCode).toBe(200);
    expect(send.json().message_id).toBe(known);

    for (let round = 0; round < 6; round++) await sweepParkedStatuses(t.services, options, () => false, cursor);
    const owner = await t.db.pool.query(`SELECT stream_id FROM es.events WHERE type = 'TemplateSendAccepted' AND data->>'providerMessageId' = $1`, [known]);
    const statuses = (await eventsOf(t.db.pool, owner.rows[0].stream_id)).filter((e) => e.type === 'DeliveryStatusRecorded').map((e) => `${e.data.status}@${e.data.at}`);
    expect(statuses).toEqual([`delivered@${T1}`, `read@${T2}`]);
    const left = await t.db.pool.query<{ id: string }>('SELECT provider_message_id AS id FROM public.parked_provider_statuses ORDER BY seq');
    expect(left.rows.map((r) => r.id)).toEqual(['wamid.REVIEW8-U1', 'wamid.REVIEW8-U2']);
  });
});
