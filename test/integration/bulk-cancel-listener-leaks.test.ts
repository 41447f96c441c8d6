import type { PoolClient } from 'pg';
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

  type Client = PoolClient & { processID?: number | null };
  const poolOf = () => t.db.pool as unknown as { _clients: Client[]; _idle: Array<{ client: Client }> };
  /** the channels the client's backend listens to (asked on that client: no other backend can tell) */
  const channelsOf = async (c: Client) =>
    (await c.query<{ channels: string[] }>(`SELECT coalesce(array_agg(c), '{}') AS channels FROM pg_listening_channels() c`)).rows[0].channels;
  /** the dispatcher's LISTEN connection, once LISTEN has been answered on it */
  const listenerOf = (d: BulkDispatcher) => (d as unknown as { cancels: { connection?: Client } }).cancels.connection;
  /**
   * The dispatcher's connection `c` no longer listens: given back to the pool, where its backend listens to nothing,
   * or closed, its backend gone. (Found by its last statement, `LISTEN ...` in pg_stat_activity, a listening backend
   * was missed once the listener's heartbeat, SELECT 1, had run; and an UNLISTEN-less one a later user took.)
   */
  const noLongerListening = async (d: BulkDispatcher, c: Client) => {
    if (listenerOf(d) === c) return false;
    const pool = poolOf();
    if (!pool._clients.includes(c)) {
      return (await t.db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [c.processID])).rowCount === 0;
    }
    if (!pool._idle.some((i) => i.client === c)) return false; // still held, by the listener or a later user
    try {
      return (await channelsOf(c)).length === 0;
    } catch {
      return false; // closed meanwhile (the pool's idle timeout): asked again
    }
  };
  /** backends whose last statement is a LISTEN for cancels (a listener stopped while connecting may leave one) */
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
      await until('LISTEN up', async () => listenerOf(d) !== undefined);
      const c = listenerOf(d)!;
      expect(await channelsOf(c)).toEqual([BULK_CANCEL_CHANNEL]);
      if (i % 2 === 0) await d.stop();
      else d.kill();
      await until('LISTEN gone', () => noLongerListening(d, c));
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
    // a connection given back UNLISTENed, or closed (its backend exits when the scheduler lets it: waited for, not a
    // fixed 200 ms)
    await until('no backend left listening', async () => (await listening()) === 0);
    for (const { client } of [...poolOf()._idle]) expect(await channelsOf(client)).toEqual([]);
  });
});
