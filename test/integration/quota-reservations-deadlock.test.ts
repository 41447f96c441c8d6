import pino from 'pino';
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { purgeExpiredQuotaReservations, QuotaHolds, SendQuotaGate } from '../../src/commands/send/quota-gate';
import { createTestContext, type TestContext } from '../support/services';

// The near-limit reservation's delete of its number's expired reservations racing answered requests' own deletes
// (docs/sends.md, "Quota gate", "Expired reservations"). A request holding two reservations (a keyed request that
// validated twice) deletes them by primary key; on a table of this size Postgres plans that as an index scan of
// the primary key (uuid order), and the gate's delete of expired rows as a scan of the number's rows (heap or
// recipient order): two deletes of the same rows in different orders. The gate's delete used to wait for rows
// another statement held, so each waited for the other: 40P01, and the aborted one was the send's (a 500) or the
// answered request's (its rows left behind). The gate's delete now skips rows another statement holds.

const NOW = new Date('2026-03-01T10:00:00.000Z');
const EXPIRED = new Date(NOW.getTime() - 1);
/** other numbers' live reservations: the table size at which the answered request's delete is a primary-key scan */
const BACKGROUND_ROWS = 300_000;

describe('quota reservation deletes racing each other', () => {
  let t: TestContext;
  let db: TestContext['db'];
  const errors: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void errors.push(JSON.parse(line).err?.message ?? line) });
  let nextNumber = 10_000;

  beforeAll(async () => {
    t = await createTestContext({ now: () => NOW }); // the runner makes the read models' tables
    db = t.db;
    await db.pool.query(
      `INSERT INTO public.send_quota_reservations (reservation_id, number_id, recipient, expires_at)
       SELECT gen_random_uuid(), 1 + n % 5000, '+54911' || lpad(n::text, 8, '0'), $2 FROM generate_series(1, $1) n`,
      [BACKGROUND_ROWS, new Date(NOW.getTime() + 3_600_000)],
    );
    await db.pool.query('ANALYZE public.send_quota_reservations');
  });
  afterAll(async () => {
    await t?.close();
  });
  beforeEach(() => {
    errors.length = 0;
  });

  async function insertExpired(numberId: number, rows: { id: string; recipient: string }[]): Promise<void> {
    await db.pool.query(
      `INSERT INTO public.send_quota_reservations (reservation_id, number_id, recipient, expires_at)
       SELECT id, $3, recipient, $4 FROM unnest($1::uuid[], $2::text[]) AS u(id, recipient)`,
      [rows.map((r) => r.id), rows.map((r) => r.recipient), numberId, EXPIRED],
    );
  }

  /** Two reservation ids, the second lower in the primary key's order (compared as Postgres compares uuids). */
  function descendingPair(): [string, string] {
    const [a, b] = [randomUUID(), randomUUID()];
    return a > b ? [a, b] : [b, a];
  }

  async function waitingStatements(fragment: string): Promise<number> {
    const r = await db.pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND position($1 in query) > 0`,
      [fragment],
    );
    return r.rows[0].n;
  }

  async function until(done: () => Promise<boolean>): Promise<void> {
    while (!(await done())) await new Promise((r) => setTimeout(r, 10));
  }

  const settled = (p: Promise<unknown>) => {
    const state = { done: false };
    void p.then(() => (state.done = true), () => (state.done = true));
    return state;
  };

  it('the plans: an answered request deletes by primary key, in its order', async () => {
    const plan = await db.pool.query('EXPLAIN DELETE FROM public.send_quota_reservations WHERE reservation_id = ANY($1::uuid[])', [[randomUUID(), randomUUID()]]);
    expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('Index Scan using send_quota_reservations_pkey');
  });

  it('the gate deletes expired rows while another statement holds one and answered requests delete theirs: no deadlock', async () => {
    const numberId = nextNumber++;
    const gate = new SendQuotaGate(db.pool, logger, 30_000);
    // each answered request's two expired rows lie on both sides of a row another statement holds, in the gate's
    // order (recipients and insertion alike), and in the opposite order in the primary key's
    const pairs = Array.from({ length: 5 }, descendingPair);
    const held = randomUUID();
    await insertExpired(numberId, pairs.map(([first], k) => ({ id: first, recipient: `+5492200000${k}` })));
    await insertExpired(numberId, [{ id: held, recipient: '+54933000000' }]);
    await insertExpired(numberId, pairs.map(([, second], k) => ({ id: second, recipient: `+5494400000${k}` })));

    const holder: PoolClient = await db.pool.connect();
    let released: Promise<unknown> = Promise.resolve();
    let admit: Promise<unknown> = Promise.resolve();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM public.send_quota_reservations WHERE reservation_id = $1 FOR UPDATE', [held]);
      admit = gate.admit(new QuotaHolds(gate), { numberId, tier: 'TIER_50', recipient: '+5491199999991', now: NOW });
      const admitState = settled(admit);
      // before the fix the gate's delete waits here for the held row, holding the first rows of the pairs
      await until(async () => admitState.done || (await waitingStatements('WITH expired AS')) > 0);
      const requests = pairs.map(([first, second]) => {
        const holds = new QuotaHolds(gate);
        holds.reservations.push(first, second);
        return holds.release();
      });
      released = Promise.all(requests);
      const releasedState = settled(released);
      if (!admitState.done) await until(async () => releasedState.done || (await waitingStatements('reservation_id = ANY')) === pairs.length);
    } finally {
      await holder.query('COMMIT').catch(() => undefined);
      holder.release();
    }
    const results = await Promise.allSettled([admit, released]);
    for (const r of results) if (r.status === 'rejected') errors.push(`send failed: ${String(r.reason?.message ?? r.reason)}`);

    expect(errors).toEqual([]);
    expect(await admit).toBeUndefined();
    const left = await db.pool.query('SELECT reservation_id FROM public.send_quota_reservations WHERE number_id = $1 AND expires_at <= $2', [numberId, NOW]);
    expect(left.rows.map((r) => r.reservation_id)).toEqual(expect.not.arrayContaining(pairs.flat()));
    await purgeExpiredQuotaReservations(db.pool, NOW);
    const after = await db.pool.query('SELECT count(*)::int AS n FROM public.send_quota_reservations WHERE number_id = $1 AND expires_at <= $2', [numberId, NOW]);
    expect(after.rows[0].n).toBe(0);
  });

  const ROUNDS = 10;
  const PAIRS = 1_000;
  const SENDS = 60; // on a TIER_50 number with no recipient in the window: 50 go, 10 are refused
  it(`${ROUNDS} rounds of ${SENDS} concurrent near-limit sends from 3 processes, ${PAIRS} answered requests and the sweep: no deadlock, 50 sent`, async () => {
    const gates = [0, 1, 2].map(() => new SendQuotaGate(db.pool, logger, 30_000));
    const admittedPerRound: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const numberId = nextNumber++;
      // each answered request's two rows: its first validation's, then its second's (same recipient)
      const pairs = Array.from({ length: PAIRS }, () => [randomUUID(), randomUUID()]);
      await insertExpired(numberId, pairs.map(([first], k) => ({ id: first, recipient: `+549220${String(k).padStart(6, '0')}` })));
      await insertExpired(numberId, pairs.map(([, second], k) => ({ id: second, recipient: `+549220${String(k).padStart(6, '0')}` })));
      let admitted = 0;
      const pause = () => new Promise((r) => setTimeout(r, Math.random() * 10));
      const results = await Promise.allSettled([
        ...Array.from({ length: SENDS }, (_, i) =>
          gates[i % 3]
            .admit(new QuotaHolds(gates[i % 3]), { numberId, tier: 'TIER_50', recipient: `+5493${String(i).padStart(9, '0')}`, now: NOW })
            .then((refused) => void (refused ? undefined : admitted++)),
        ),
        ...pairs.map((ids) => {
          const holds = new QuotaHolds(gates[0]);
          holds.reservations.push(...ids);
          return pause().then(() => holds.release());
        }),
        pause().then(() => purgeExpiredQuotaReservations(db.pool, NOW)),
      ]);
      for (const r of results) if (r.status === 'rejected') errors.push(`send failed: ${String(r.reason?.message ?? r.reason)}`);
      admittedPerRound.push(admitted);
      const live = await db.pool.query('SELECT count(*)::int AS n FROM public.send_quota_reservations WHERE number_id = $1 AND expires_at > $2', [numberId, NOW]);
      expect(live.rows[0].n).toBe(admitted);
    }
    expect(errors).toEqual([]);
    expect(admittedPerRound).toEqual(Array(ROUNDS).fill(50));
  });
});
