import pino from 'pino';
import { QuotaHolds, quotaLockKey, SendQuotaGate } from '../../src/commands/send/quota-gate';
import { waitUntil } from '../support/sends';
import { createTestContext, type TestContext } from '../support/services';

// Review 15f: the quota check's transaction ended by Postgres under it (a process paused in it past
// idle_in_transaction_session_timeout, a terminated backend) failed its send with a 500; it reserved nothing, so the
// check is tried again on a fresh connection. Here the transaction is ended while it waits for the number's lock.

const NOW = new Date('2026-03-01T10:00:00.000Z');
const NUMBER = 4_242;

describe('review 15f: a quota check whose transaction Postgres ended', () => {
  let t: TestContext;
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });

  beforeAll(async () => {
    t = await createTestContext({ now: () => NOW }); // the runner makes the read models' tables
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The backend waiting for the number's quota lock, other than those of `except`. */
  const waiter = (except: number[]) =>
    waitUntil(async () => (await t.db.pool.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> ALL($1::int[]) AND wait_event_type = 'Lock'
          AND query LIKE '%pg_advisory_xact_lock%'`,
      [except],
    )).rows[0]?.pid, 20_000, 'a quota check waiting for the lock');

  it('is tried again on a fresh connection and reserves the recipient once', async () => {
    const gate = new SendQuotaGate(t.db.pool, logger, 30_000);
    const holder = await t.db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [quotaLockKey(NUMBER)]);
      const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const holds = new QuotaHolds(gate);
      const admitted = gate.admit(holds, { numberId: NUMBER, tier: 'TIER_50', recipient: '+5491155550001', now: NOW });
      admitted.catch(() => undefined);
      const first = await waiter([holderPid]);
      await t.db.pool.query('SELECT pg_terminate_backend($1)', [first]);
      await waiter([holderPid, first]); // the check again, on another connection
      await holder.query('COMMIT');
      await expect(admitted).resolves.toBeUndefined();
      expect(holds.reservations).toHaveLength(1);
      const rows = await t.db.pool.query('SELECT recipient FROM public.send_quota_reservations WHERE number_id = $1', [NUMBER]);
      expect(rows.rows).toEqual([{ recipient: '+5491155550001' }]);
      expect(warnings).toContain('quota check lost its connection; trying again');
    } finally {
      holder.release();
    }
  });
});
