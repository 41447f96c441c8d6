import pino from 'pino';
import type { FastifyInstance } from 'fastify';
import { acquireNumberLease } from '../../src/commands/bulk/work-number-leases';
import { resolveExpiredInFlight } from '../../src/commands/bulk/work-outcomes';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { purgeExpiredQuotaReservations, QuotaHolds, SendQuotaGate } from '../../src/commands/send/quota-gate';
import { uniqueRecipientsSent24h } from '../../src/projections/accounts/queries';
import { SHOP, sendsFixture, waitUntil } from '../support/sends';
import { createTestApp } from '../support/services';
import { anotherServeProcess } from '../support/another-process';
import { sweepBulkLeasesNow } from '../support/bulk';

// Clocks of several processes (docs/reliability.md, 2026-11-28): the quota reservations of sends in flight, a bulk
// number's pacing lease and a bulk recipient's in-flight lease are written with one process's clock and were judged
// with another's. A process whose clock ran ahead by more than the reservation's 30 s stopped counting (and deleted)
// the reservations of the others' sends in flight, so a number passed its quota; a dispatcher ahead by more than the
// number lease took a live lease over; a sweep ahead by more than the recipient lease interrupted a live dispatcher's
// recipients. Each now ends only when both the judging process's clock and Postgres's have passed it.
// Last, the read model's pruning (src/projections/accounts/projection.ts) of a number's rows before a send's time.

const SEND = '/api/v1/platform-templates/send/';
const LIMIT = 50; // TIER_50
const HOUR = 3_600_000;

/** Another `serve` process on the same database, with its own clock. */
const otherProcess = (url: string, now: () => Date) => anotherServeProcess(url, { now });

jest.setTimeout(180_000);

describe('clock skew: quota reservations and bulk leases across processes', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let offsetMs = 0; // process A's clock, as an offset from the machine's
  const logger = pino({ level: 'silent' });

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(Date.now() + offsetMs) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const reservations = async (numberId: number) =>
    (await t.db.pool.query('SELECT count(*)::int AS n FROM public.send_quota_reservations WHERE number_id = $1', [numberId])).rows[0].n as number;
  const recipient = (i: number) => `+54911770${String(i).padStart(4, '0')}1`;

  it("a process 40 s ahead counts the others' reservations of sends in flight (30 s) and deletes none: the quota holds", async () => {
    const numberId = 9901;
    const a = new SendQuotaGate(t.db.pool, logger, 30_000);
    const b = new SendQuotaGate(t.db.pool, logger, 30_000);
    const holdsA = new QuotaHolds(a);
    const now = new Date();
    for (let i = 0; i < LIMIT; i++) expect(await a.admit(holdsA, { numberId, tier: 'TIER_50', recipient: recipient(i), now })).toBeUndefined();
    expect(holdsA.reservations).toHaveLength(LIMIT); // every admission near the limit reserved its recipient
    const ahead = new Date(now.getTime() + 40_000);
    expect(await b.admit(new QuotaHolds(b), { numberId, tier: 'TIER_50', recipient: recipient(LIMIT), now: ahead }))
      .toEqual({ used: LIMIT, dailyLimit: LIMIT });
    expect(await purgeExpiredQuotaReservations(t.db.pool, ahead)).toBe(0);
    expect(await reservations(numberId)).toBe(LIMIT);
    await holdsA.release();
    expect(await reservations(numberId)).toBe(0);
  });

  it('a dispatcher 40 s ahead does not take a live number lease (30 s) over; a lapsed one it does', async () => {
    const now = new Date();
    expect(await acquireNumberLease(t.db.pool, 9902, 'dispatcher-a', now, 30_000)).toBe(true);
    expect(await acquireNumberLease(t.db.pool, 9902, 'dispatcher-b', new Date(now.getTime() + 40_000), 30_000)).toBe(false);
    expect(await acquireNumberLease(t.db.pool, 9903, 'dispatcher-a', new Date(now.getTime() - 60_000), 30_000)).toBe(true);
    expect(await acquireNumberLease(t.db.pool, 9903, 'dispatcher-b', now, 30_000)).toBe(true);
  });

  it('the bulk lease sweep 40 s ahead does not release a live number lease (30 s); a lapsed one it does', async () => {
    const now = new Date();
    expect(await acquireNumberLease(t.db.pool, 9905, 'dispatcher-a', now, 30_000)).toBe(true);
    expect(await acquireNumberLease(t.db.pool, 9906, 'dispatcher-a', new Date(now.getTime() - 60_000), 30_000)).toBe(true);
    await sweepBulkLeasesNow(t.services, { now: () => new Date(now.getTime() + 40_000) });
    const leases = await t.db.pool.query('SELECT number_id FROM bulk_work.number_leases WHERE number_id IN (9905, 9906) ORDER BY number_id');
    expect(leases.rows).toEqual([{ number_id: 9905 }]);
  });

  it("a lease sweep 40 s ahead does not interrupt a live dispatcher's recipients in flight (30 s lease)", async () => {
    const now = new Date();
    const insert = (bulkId: string, leaseUntil: Date) => t.db.pool.query(
      `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables, state, attempts, dispatcher, lease_until, claimed_at)
       VALUES ($1, 0, 0, 9904, '+5491177000001', '+5491177000001', '{}', '{}', 'in_flight', 1, 'dispatcher-a', $2, $3)`,
      [bulkId, leaseUntil, now],
    );
    const live = '00000000-0000-4000-8000-00000000c10c';
    const dead = '00000000-0000-4000-8000-00000000dead';
    await insert(live, new Date(now.getTime() + 30_000));
    await insert(dead, new Date(now.getTime() - 60_000));
    const swept = await resolveExpiredInFlight(t.db.pool, new Date(now.getTime() + 40_000));
    expect(swept.count).toBe(1);
    const states = await t.db.pool.query(`SELECT bulk_id, state FROM bulk_work.recipients WHERE number_id = 9904 ORDER BY bulk_id`);
    expect(states.rows).toEqual([{ bulk_id: live, state: 'in_flight' }, { bulk_id: dead, state: 'failed' }]);
    await t.db.pool.query('DELETE FROM bulk_work.outcome_batches WHERE id = ANY($1::bigint[])', [swept.batchIds]);
  });

  // The read model pruned a number's rows older than 25 h before the time of the send it records: a send by a process
  // 2 h ahead pruned rows 23.5 h old, still in the 24-h window of a process on time, which then admitted one new
  // recipient past the tier. Now pruned before the earlier of the send's time and Postgres's.
  it('a send by a process 2 h ahead does not prune the rows of the window another process counts', async () => {
    const number = SHOP.smallNumber; // TIER_50, no sends yet
    const send = (app: FastifyInstance, to: string) => app.inject({
      method: 'POST', url: SEND, headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: number.phoneNumberId, template_name: 'welcome', recipient_phone: to },
    });
    offsetMs = -23.5 * HOUR; // sends made 23.5 h ago
    for (let i = 0; i < LIMIT - 1; i++) expect((await send(t.app, recipient(100 + i))).statusCode).toBe(200);
    offsetMs = 0;
    expect(await uniqueRecipientsSent24h(t.db.pool, number.id, new Date())).toBe(LIMIT - 1);
    const b = await otherProcess(t.db.url, () => new Date(Date.now() + 2 * HOUR));
    try {
      expect((await send(b.app, recipient(200))).statusCode).toBe(200);
    } finally {
      await b.close();
    }
    // the number is at its tier for a process on time (49 sends 23.5 h ago and one now; B's is in the future)
    await waitUntil(async () => (await t.db.pool.query(`SELECT 1 FROM rm_accounts.quota_recipients WHERE recipient = $1`, [recipient(200)])).rowCount === 1,
      20_000, "B's send in the read model");
    const refused = await send(t.app, recipient(201));
    expect(refused.statusCode).toBe(429);
  });
});
