import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, FakeClock, phones, RecordingProvider, sandbox, storedCounters, sweepBulkLeasesNow, waitForBulk } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';

// Review 9: a window whose sending outlasts its recipients' lease (a slow provider). The lease sweep resolves the
// rows still in flight as "interrupted, outcome unknown" (failed); before the fix the dispatcher went on sending
// them, so recipients recorded failed had the message, sent after their lease had run out.

const START = Date.parse('2026-03-01T10:00:00.000Z');
const LEASE = 60_000;
const CALL_MS = 25_000;

describe('bulk dispatcher: a window slower than its lease', () => {
  let t: TestContext;
  const clock = new FakeClock(START);
  let provider: RecordingProvider;
  let dispatcher: BulkDispatcher | undefined;

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), clock.now);
    t = await createTestContext({ now: clock.now, provider });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await t?.close();
  });

  it('starts no send after its recipient\'s lease ran out: every recipient sent once and recorded sent', async () => {
    const list = phones(10, '+54911710');
    // every call takes 25 s of the (fake) clock; the lease sweep runs meanwhile, as its cron would
    provider.hold = async () => {
      clock.advance(CALL_MS);
      await sweepBulkLeasesNow(t.services, { flushGraceMs: 0 });
    };
    const created = await createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: BULK_CO.unlimited.phoneNumberId,
      templateName: 'welcome', language: 'es', recipients: list.map((phone) => ({ phone })),
    });
    dispatcher = new BulkDispatcher(t.services, {
      now: clock.now, sleep: clock.sleep, pollMs: 20, recipientLeaseMs: LEASE, provider, unlimitedWindow: 10, concurrency: 1,
    });
    dispatcher.start();
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (b) => b.status !== 'QUEUED' && b.status !== 'PROCESSING');

    // no call started at or after the end of the lease its row was claimed with
    const rows = (await t.db.pool.query(`SELECT phone, claimed_at FROM bulk_work.recipients WHERE bulk_id = $1`, [created.bulkId])).rows;
    const leaseEnd = new Map(rows.map((r) => [r.phone as string, (r.claimed_at as Date).getTime() + LEASE]));
    const late = provider.calls.filter((c) => list.includes(c.to) && c.at >= leaseEnd.get(c.to)!);
    expect(late).toEqual([]);
    expect(list.map((p) => provider.perRecipient.get(p) ?? 0)).toEqual(Array(10).fill(1));
    expect(done).toMatchObject({ status: 'COMPLETED', sentCount: 10, failedCount: 0, pendingCount: 0 });
    expect(await storedCounters(t.db.pool, created.bulkId)).toMatchObject({ sent_count: 10, failed_count: 0, pending_count: 0 });
  });
});
