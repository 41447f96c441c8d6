import { createBulkSend } from '../../src/commands/bulk/create';
import { materializeChunks } from '../../src/commands/bulk/work';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CO, bulkFixture, phones } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';

// The dispatcher's materialization copies chunk streams into work rows and computes each phone's E.164 form (the
// chunk events carry the phone as the client sent it, so it must). It normalized a whole chunk (1,000 phones, 70 to
// 500 ms measured on the shared machine) in one piece between its reads and inserts. Now in slices that give the
// event loop turns (docs/bulk.md, "Event loop"). Proven without timing thresholds: the real normalizePhone is
// wrapped (not replaced) and made to take at least 1 ms for its first 64 calls (a slow normalizer, whatever the
// machine's speed); a setImmediate queued at the materialization's first phone runs before the chunk's phones are
// all normalized. Before the fix it ran only after the chunk's 1,000th phone (at the next read's I/O).

const counter = { calls: 0, slowFor: 0, onCall: undefined as ((n: number) => void) | undefined };
jest.mock('../../src/shared/phone', () => {
  const real = jest.requireActual('../../src/shared/phone');
  return {
    ...real,
    normalizePhone: (raw: string) => {
      counter.calls++;
      counter.onCall?.(counter.calls);
      if (counter.calls <= counter.slowFor) {
        const until = performance.now() + 1;
        while (performance.now() < until) { /* a slow normalizer */ }
      }
      return real.normalizePhone(raw);
    },
  };
});
const { normalizePhone } = jest.requireActual('../../src/shared/phone') as typeof import('../../src/shared/phone');

describe('materialization gives the event loop turns', () => {
  let t: TestContext;

  beforeAll(async () => {
    t = await createTestContext({ now: () => new Date('2026-03-01T10:00:00.000Z') });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    counter.onCall = undefined;
    await t?.close();
  });

  it('a setImmediate queued at the first phone runs before the first chunk is normalized; the rows carry the same E.164', async () => {
    // the provider's spelling (Argentina without the 9): the E.164 form differs from the text
    const list = phones(2500, '+5411760');
    const created = await createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: BULK_CO.unlimited.phoneNumberId,
      templateName: 'welcome', language: 'es', recipients: list.map((phone) => ({ phone })),
    });
    expect(created.uniqueRecipients).toBe(2500);

    let immediateRanAt: number | undefined;
    counter.calls = 0;
    counter.slowFor = 64;
    counter.onCall = (n) => {
      if (n === 1) setImmediate(() => { immediateRanAt = counter.calls; });
    };
    expect(await materializeChunks(t.services, created.bulkId, 5)).toBe(3);
    counter.onCall = undefined;
    counter.slowFor = 0;

    expect(counter.calls).toBe(2500);
    expect(immediateRanAt).toBeDefined();
    expect(immediateRanAt!).toBeLessThan(1000);

    const rows = await t.db.pool.query('SELECT idx, phone, e164 FROM bulk_work.recipients WHERE bulk_id = $1 ORDER BY idx', [created.bulkId]);
    expect(rows.rows).toEqual(list.map((phone, idx) => ({ idx, phone, e164: normalizePhone(phone) ?? phone })));
    expect(rows.rows[0].e164).not.toBe(rows.rows[0].phone);
  });
});
