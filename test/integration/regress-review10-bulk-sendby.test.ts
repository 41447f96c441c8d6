import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, FakeClock, phones, RecordingProvider, sandbox, storedCounters, waitForBulk } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';

// Review 10 of 01ab2d1 (a window starts sends only before `sendBy`: half the number lease on spaced tiers). Found
// sound: this test passes. A TIER_250 number (windows of 8) behind a provider whose every call takes 20 s, more than
// the 15 s of the default 30 s number lease: every window sends its first row only, the other 7 go back to pending.
// The bulk still finishes, each recipient is sent once, the unsent claims leave no attempt counted, and the clock
// does not run away (no busy loop of claims).

const START = Date.parse('2026-03-01T10:00:00.000Z');
const CALL_MS = 20_000;

describe('review 10: windows cut short by sendBy still finish the bulk', () => {
  let t: TestContext;
  const clock = new FakeClock(START);
  let provider: RecordingProvider;
  let dispatcher: BulkDispatcher | undefined;

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), clock.now);
    t = await createTestContext({ now: clock.now, provider });
    const fixture = bulkFixture();
    const pacing = fixture.companies[0].phoneNumbers.find((n: { id: number }) => n.id === BULK_CO.pacing.id);
    pacing.messagingLimitTier = 'TIER_250';
    await seedFixture(t.services, fixture, { actor: 'test' });
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await t?.close();
  });

  it('one send per window, 20 recipients: completed, each sent once, attempts 1', async () => {
    const list = phones(20, '+54911790');
    provider.hold = async () => {
      clock.advance(CALL_MS);
    };
    const created = await createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: BULK_CO.pacing.phoneNumberId,
      templateName: 'welcome', language: 'es', recipients: list.map((phone) => ({ phone })),
    });
    dispatcher = new BulkDispatcher(t.services, { now: clock.now, sleep: clock.sleep, pollMs: 20, concurrency: 1, provider });
    dispatcher.start();
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (b) => b.status !== 'QUEUED' && b.status !== 'PROCESSING');
    expect(done).toMatchObject({ status: 'COMPLETED', sentCount: 20, failedCount: 0, pendingCount: 0 });
    expect(list.map((p) => provider.perRecipient.get(p) ?? 0)).toEqual(Array(20).fill(1));
    const rows = (await t.db.pool.query(`SELECT idx, attempts FROM bulk_work.recipients WHERE bulk_id = $1 ORDER BY idx`, [created.bulkId])).rows;
    expect(rows.map((r) => r.attempts)).toEqual(Array(20).fill(1));
    expect(await storedCounters(t.db.pool, created.bulkId)).toMatchObject({ sent_count: 20, failed_count: 0, pending_count: 0 });
    // the windows were cut: the sends are not in list order (0, 8, 16, then the rows given back)
    const order = provider.calls.filter((c) => list.includes(c.to)).map((c) => list.indexOf(c.to));
    expect(order.slice(0, 3)).toEqual([0, 8, 16]);
    // 20 calls of 20 s, plus pacing and polls: nowhere near an hour of fake time
    expect(clock.t - START).toBeLessThan(3600_000);
  });
});
