import type { Pool, PoolClient } from 'pg';
import pino from 'pino';
import { QuotaHolds, SendQuotaGate } from '../../src/commands/send/quota-gate';
import { createTestContext, type TestContext } from '../support/services';

// Review 16a (regression review of 4f38717): the quota check tried again after a lost connection. The hard case is
// a COMMIT that reached Postgres while its answer was lost with the connection: the reservation is written, and the
// check, tried again under the same reservation id, must admit the send holding that one reservation (not a second
// one, not a refusal counting its own reservation, not a unique-key error). The connection is really ended by
// Postgres right after its COMMIT; only the lost answer is made here.

const NOW = new Date('2026-03-01T10:00:00.000Z');
const NUMBER = 4_343;

/** The pool, except that the first COMMIT of a pooled connection commits, has its backend ended, and fails. */
function commitAnswerLostOnce(pool: Pool): { pool: Pool; lost: () => number } {
  let lost = 0;
  const connect = async () => {
    const client = (await pool.connect()) as PoolClient;
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: unknown }).query = async (...args: unknown[]) => {
      if (args[0] !== 'COMMIT' || lost > 0) return query(...args);
      const pid = ((await query('SELECT pg_backend_pid() AS pid')) as { rows: Array<{ pid: number }> }).rows[0].pid;
      await query('COMMIT');
      lost++;
      await pool.query('SELECT pg_terminate_backend($1)', [pid]);
      throw new Error('Connection terminated unexpectedly');
    };
    return client;
  };
  const wrapped = new Proxy(pool, {
    get(target, prop) {
      if (prop === 'connect') return connect;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { pool: wrapped, lost: () => lost };
}

describe('review 16a: a quota check whose COMMIT answer was lost', () => {
  let t: TestContext;
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });

  beforeAll(async () => {
    t = await createTestContext({ now: () => NOW }); // the runner makes the read models' tables
  });
  afterAll(async () => {
    await t?.close();
  });

  it('admits the send once, holding the one reservation it wrote; giving it back leaves none', async () => {
    const flaky = commitAnswerLostOnce(t.db.pool);
    const gate = new SendQuotaGate(flaky.pool, logger, 30_000);
    const holds = new QuotaHolds(gate);
    // TIER_50: every new recipient is reserved under the number's lock
    await expect(gate.admit(holds, { numberId: NUMBER, tier: 'TIER_50', recipient: '+5491155550002', now: NOW })).resolves.toBeUndefined();
    expect(flaky.lost()).toBe(1);
    expect(warnings).toContain('quota check lost its connection; trying again');
    expect(holds.reservations).toHaveLength(1);
    const rows = await t.db.pool.query('SELECT reservation_id, recipient FROM public.send_quota_reservations WHERE number_id = $1', [NUMBER]);
    expect(rows.rows).toEqual([{ reservation_id: holds.reservations[0], recipient: '+5491155550002' }]);
    await holds.release();
    expect((await t.db.pool.query('SELECT 1 FROM public.send_quota_reservations WHERE number_id = $1', [NUMBER])).rowCount).toBe(0);
  });
});
