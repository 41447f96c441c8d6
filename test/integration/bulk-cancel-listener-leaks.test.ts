import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CANCEL_CHANNEL } from '../../src/commands/bulk/signals';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { bulkFixture, FakeClock, RecordingProvider, sandbox } from '../support/bulk';
import { createTestApp } from '../support/services';

// Regression hunt (2026-11-27, helper B): each bulk dispatcher holds one LISTEN connection for cancels from other
// processes. Stopped or killed, it gives that connection back UNLISTENed, so dispatchers started and stopped over
// and over never exhaust the pool (20) nor leave backends listening.

const START = Date.parse('2026-03-01T10:00:00.000Z');

describe('the bulk dispatcher\'s cancel listener (regression hunt)', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = new FakeClock(START);

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now, provider: new RecordingProvider(sandbox(), clock.now) });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(() => t?.close());

  const listening = async () =>
    (await t.db.pool.query(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN ${BULK_CANCEL_CHANNEL}%'`,
    )).rowCount ?? 0;
  const until = async (what: string, check: () => Promise<boolean>) => {
    for (const deadline = Date.now() + 10_000; !(await check());) {
      if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it('30 dispatchers started and stopped, or killed, one after another: none left listening, the pool not held', async () => {
    const pool = t.db.pool as unknown as { totalCount: number; idleCount: number; waitingCount: number };
    // the app's own (its caches' LISTEN connections, the runner's batch when one runs at that moment: so an upper bound)
    const heldBefore = pool.totalCount - pool.idleCount;
    for (let i = 0; i < 30; i++) {
      const d = new BulkDispatcher(t.services, { now: clock.now, sleep: clock.sleep, pollMs: 20 });
      d.start();
      await until('LISTEN up', async () => (await listening()) === 1);
      if (i % 2 === 0) await d.stop();
      else d.kill();
      await until('LISTEN gone', async () => (await listening()) === 0);
    }
    await until('connections back', async () => pool.totalCount - pool.idleCount <= heldBefore);
    expect(pool.waitingCount).toBe(0);
    expect(pool.totalCount - pool.idleCount).toBeLessThanOrEqual(heldBefore); // 4 held before, 3 after: seen in CI
  });

  it('a dispatcher stopped at once (its LISTEN still connecting) leaves nothing listening', async () => {
    for (let i = 0; i < 10; i++) {
      const d = new BulkDispatcher(t.services, { now: clock.now, sleep: clock.sleep, pollMs: 20 });
      d.start();
      await d.stop();
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(await listening()).toBe(0);
  });
});
