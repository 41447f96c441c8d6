import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { BulkDispatcher, type BulkDispatcherOptions } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, FakeClock, phones, RecordingProvider, sandbox, waitForBulk } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';

// A number's tier spacing holds from one bulk to the next (2026-11-27): the next bulk's first send comes a spacing
// after the previous bulk's last one, in the same process (the dispatcher keeps the number's next send slot) and
// in another one (the released number lease stays on its row until that slot). Fake clock: no waiting.

const START = Date.parse('2026-03-01T10:00:00.000Z');
const SPACING = 1200; // TIER_50

describe('bulk dispatcher: pacing from one bulk to the next on a number', () => {
  let t: TestContext;
  const clock = new FakeClock(START);
  let provider: RecordingProvider;
  const running: BulkDispatcher[] = [];

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), clock.now);
    t = await createTestContext({ now: clock.now, provider });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((d) => d.stop()));
  });
  afterAll(async () => {
    await t?.close();
  });

  const dispatcher = (options: BulkDispatcherOptions = {}) => {
    const d = new BulkDispatcher(t.services, { now: clock.now, sleep: clock.sleep, pollMs: 20, provider, ...options });
    running.push(d);
    d.start();
    return d;
  };
  const bulkOf = (list: string[]) =>
    createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: BULK_CO.pacing.phoneNumberId,
      templateName: 'welcome', language: 'es', recipients: list.map((phone) => ({ phone })),
    });
  const finished = (b: { status: string }) => ['COMPLETED', 'PARTIAL', 'FAILED'].includes(b.status);
  const sendTimes = (list: string[]) => provider.calls.filter((c) => list.includes(c.to)).map((c) => c.at);
  const gaps = (times: number[]) => times.slice(1).map((at, i) => at - times[i]);
  const realPause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('in one process: the second bulk starts a spacing after the first one\'s last send', async () => {
    dispatcher();
    const first = phones(3, '+54911700');
    const a = await bulkOf(first);
    await waitForBulk(t.db.pool, BULK_CO.companyId, a.bulkId, finished);
    const second = phones(3, '+54911701');
    const b = await bulkOf(second);
    await waitForBulk(t.db.pool, BULK_CO.companyId, b.bulkId, finished);
    expect(gaps([...sendTimes(first), ...sendTimes(second)])).toEqual([SPACING, SPACING, SPACING, SPACING, SPACING]);
  });

  it('in another process: the number lease stays until the next slot, so the next dispatcher keeps the spacing', async () => {
    clock.advance(60_000); // the previous test's slot is long past
    const p1 = dispatcher({ id: 'process-1' });
    const first = phones(3, '+54911702');
    const a = await bulkOf(first);
    await waitForBulk(t.db.pool, BULK_CO.companyId, a.bulkId, finished);
    await p1.stop();
    const lastSend = Math.max(...sendTimes(first));
    const lease = await t.db.pool.query('SELECT owner, lease_until FROM bulk_work.number_leases WHERE number_id = $1', [BULK_CO.pacing.id]);
    expect(lease.rows).toEqual([{ owner: 'process-1', lease_until: new Date(lastSend + SPACING) }]);

    const second = phones(3, '+54911703');
    const b = await bulkOf(second);
    dispatcher({ id: 'process-2' });
    await realPause(200); // process-2 polls (every 20 ms) while the clock stands just after the last send
    expect(sendTimes(second)).toEqual([]);
    clock.advance(SPACING - 1);
    await realPause(200);
    expect(sendTimes(second)).toEqual([]);
    clock.advance(2);
    await waitForBulk(t.db.pool, BULK_CO.companyId, b.bulkId, finished);
    const [firstOfSecond] = sendTimes(second);
    expect(firstOfSecond - lastSend).toBeGreaterThanOrEqual(SPACING);
    expect(gaps(sendTimes(second))).toEqual([SPACING, SPACING]);
    const started = await t.db.pool.query(`SELECT data->>'dispatcherId' AS by FROM es.events WHERE type = 'BulkSendStarted' AND data->>'bulkId' = $1`, [b.bulkId]);
    expect(started.rows).toEqual([{ by: 'process-2' }]);
  });
});
