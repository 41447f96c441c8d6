import { seedFixture } from '../../src/commands/provisioning/seed';
import type { ProviderStatusUpdate } from '../../src/commands/delivery-status';
import type { IncomingRecord } from '../../src/ports/transport';
import { sweepParkedStatuses, type SweepCursor } from '../../src/workers/parked-status-sweeper';
import { parkStatuses } from '../../src/workers/parked-statuses';
import { createTestApp } from '../support/services';
import { SHOP, sendsFixture } from '../support/sends';

// The parked-status sweeper goes round the parked statuses a batch at a time (docs/sends.md, "Delivery consumer"):
// a status whose owner appeared is applied however many older statuses still wait for theirs, not only once those
// reach their grace. Whole provider ids per round, in parking order.

const PN = SHOP.number.phoneNumberId;
const TS = '1772359205'; // 2026-03-01T10:00:05Z

const statusOf = (id: string, status = 'delivered') => {
  const value = { kind: 'status', phoneNumberId: PN, status: { id, status, timestamp: TS, recipient_id: '5491155551234' } };
  const record: IncomingRecord = { topic: 'provider.webhooks', key: id, value, headers: {}, partition: 0, offset: '0' } as IncomingRecord;
  const update = { providerMessageId: id, status: status as 'delivered', at: '2026-03-01T10:00:05.000Z', timestamp: TS, errorCode: null, errorMessage: null } as ProviderStatusUpdate;
  return { record, update };
};

describe('parked-status sweeper rounds', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2026-03-01T10:00:00.000Z') });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(() => t?.close());

  it('reaches a status whose owner is known behind more unknown ones than a round holds', async () => {
    // a real send owns this provider id; five unknown ids were parked before its status
    const send = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: PN, template_name: 'welcome', recipient_phone: '+5491155551234' },
    });
    const known = send.json().message_id as string;
    await parkStatuses(t.db.pool, [1, 2, 3, 4, 5].map((i) => statusOf(`wamid.UNKNOWN${i}`)));
    await parkStatuses(t.db.pool, [statusOf(known, 'delivered'), statusOf(known, 'read')]);

    const applied: string[] = [];
    const options = {
      topic: 'provider.webhooks', graceMs: 600_000, intervalMs: 10, batchSize: 3,
      apply: async (_owner: unknown, update: ProviderStatusUpdate) => void applied.push(`${update.providerMessageId} ${update.status}`),
      onDeadLetter: () => undefined,
    };
    const cursor: SweepCursor = { afterSeq: '0' };
    for (let round = 0; round < 4 && applied.length < 2; round++) await sweepParkedStatuses(t.services, options, () => false, cursor);
    expect(applied).toEqual([`${known} delivered`, `${known} read`]); // in parking order
    const left = await t.db.pool.query<{ id: string }>('SELECT provider_message_id AS id FROM public.parked_provider_statuses ORDER BY seq');
    expect(left.rows.map((r) => r.id)).toEqual([1, 2, 3, 4, 5].map((i) => `wamid.UNKNOWN${i}`)); // still waiting, not dead-lettered
  });
});
