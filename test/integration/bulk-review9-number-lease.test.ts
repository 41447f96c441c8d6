import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, FakeClock, phones, RecordingProvider, sandbox, waitForBulk } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';

// Review 9: a number with a spaced tier is served by one dispatcher at a time (its number lease, renewed every
// window). A window whose sending outlasted the number lease (a slow provider) kept starting sends after another
// dispatcher had taken the number over: both sent on it at once, closer than the tier's spacing.

const START = Date.parse('2026-03-01T10:00:00.000Z');
const SPACING = 60; // TIER_1000
const CALL_MS = 5_000;

describe('bulk dispatcher: a window slower than its number lease', () => {
  let t: TestContext;
  const clock = new FakeClock(START);
  let provider: RecordingProvider;
  const running: BulkDispatcher[] = [];

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), clock.now);
    t = await createTestContext({ now: clock.now, provider });
    const fixture = bulkFixture();
    const pacing = fixture.companies[0].phoneNumbers.find((n: { id: number }) => n.id === BULK_CO.pacing.id);
    pacing.messagingLimitTier = 'TIER_1000';
    await seedFixture(t.services, fixture, { actor: 'test' });
  });
  afterAll(async () => {
    await Promise.all(running.map((d) => d.stop()));
    await t?.close();
  });

  it('two dispatchers never start sends on the number closer than its spacing', async () => {
    const list = phones(40, '+54911720');
    // every call takes 5 s of the (fake) clock, and a few real ms so that the other dispatcher polls meanwhile
    provider.hold = async () => {
      await new Promise((r) => setTimeout(r, 3));
      clock.advance(CALL_MS);
    };
    const created = await createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: BULK_CO.pacing.phoneNumberId,
      templateName: 'welcome', language: 'es', recipients: list.map((phone) => ({ phone })),
    });
    for (const id of ['a', 'b']) {
      const d = new BulkDispatcher(t.services, {
        id, now: clock.now, sleep: clock.sleep, pollMs: 5, concurrency: 1, provider: provider.sibling(id),
      });
      running.push(d);
      d.start();
    }
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (b) => b.status !== 'QUEUED' && b.status !== 'PROCESSING');
    expect(done).toMatchObject({ status: 'COMPLETED', sentCount: 40 });
    expect(list.map((p) => provider.perRecipient.get(p) ?? 0)).toEqual(Array(40).fill(1));

    const starts = provider.calls.filter((c) => list.includes(c.to)).sort((x, y) => x.at - y.at);
    const tooClose = starts.slice(1).filter((c, i) => c.by !== starts[i].by && c.at - starts[i].at < SPACING);
    expect(tooClose).toEqual([]);
  });
});
