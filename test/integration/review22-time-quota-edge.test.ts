import pino from 'pino';
import { QuotaHolds, SendQuotaGate } from '../../src/commands/send/quota-gate';
import { accountsProjection, recordQuotaUse } from '../../src/projections/accounts/projection';
import { uniqueRecipientsSent24h } from '../../src/projections/accounts/queries';
import { withTransaction } from '../../src/shared/tx';
import { createTestContext, type TestContext } from '../support/services';

// Review 22 (time and calendars): the single sends' quota gate at the edge of the rolling 24 h window. A recipient in
// the window is sent to again without using quota; but when its last send leaves the window while the new send to it
// is still at the provider (the send is recorded only once answered), its slot was freed at the edge, another new
// recipient took it, and the answer then put the number one over its tier (51 of 50). Such a recipient is now reserved
// in the slot it holds (docs/sends.md, "Quota gate").

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const TTL = 30_000; // the gate's reservation lifetime: the provider's call and the recording
const LIMIT = 50; // TIER_50
const logger = pino({ level: 'silent' });
const recipient = (i: number) => `+54911880${String(i).padStart(4, '0')}1`;

describe('quota gate at the edge of the 24 h window', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext({ runner: false });
  });
  afterAll(async () => {
    await t?.close();
  });

  const use = (numberId: number, to: string, at: number) =>
    withTransaction(t.db.pool, async (tx) => {
      await tx.query(`SET LOCAL search_path TO ${accountsProjection.schema}, public`);
      await recordQuotaUse(tx, { numberId, recipient: to, at: new Date(at) });
    });
  const reservations = async (numberId: number) =>
    (await t.db.pool.query('SELECT recipient FROM public.send_quota_reservations WHERE number_id = $1 ORDER BY recipient', [numberId]))
      .rows.map((r) => r.recipient as string);
  const admit = (gate: SendQuotaGate, holds: QuotaHolds, numberId: number, to: string, now: number) =>
    gate.admit(holds, { numberId, tier: 'TIER_50', recipient: to, now: new Date(now) });

  it('a recipient whose last send leaves the window while its new send is in flight keeps its slot: no 51st recipient', async () => {
    const numberId = 7701;
    const leaving = recipient(0);
    await use(numberId, leaving, T0); // leaves the window at T0 + 24 h
    for (let i = 1; i < LIMIT; i++) await use(numberId, recipient(i), T0 + HOUR);
    const a = new SendQuotaGate(t.db.pool, logger, TTL);
    const b = new SendQuotaGate(t.db.pool, logger, TTL); // another process

    // 5 s before it leaves: the window is full (50), and the send to it is admitted (it holds a slot)
    const holds = new QuotaHolds(a);
    const before = T0 + DAY - 5_000;
    expect(await uniqueRecipientsSent24h(t.db.pool, numberId, new Date(before))).toBe(LIMIT);
    expect(await admit(a, holds, numberId, leaving, before)).toBeUndefined();
    expect(await reservations(numberId)).toEqual([leaving]);

    // it has left the window, its send is still at the provider: a new recipient finds no room
    const after = T0 + DAY + 1;
    expect(await uniqueRecipientsSent24h(t.db.pool, numberId, new Date(after))).toBe(LIMIT - 1);
    expect(await admit(b, new QuotaHolds(b), numberId, recipient(LIMIT), after)).toEqual({ used: LIMIT, dailyLimit: LIMIT });

    // the provider answers: the send is recorded, its admission given back; the number is at its limit, not over it
    const answered = before + 10_000;
    await use(numberId, leaving, answered);
    await holds.release();
    expect(await reservations(numberId)).toEqual([]);
    expect(await uniqueRecipientsSent24h(t.db.pool, numberId, new Date(answered))).toBe(LIMIT);
    expect(await admit(b, new QuotaHolds(b), numberId, recipient(LIMIT), answered)).toEqual({ used: LIMIT, dailyLimit: LIMIT });
  });

  it('a recipient that stays in the window until its send is recorded is admitted by the read alone (no reservation)', async () => {
    const numberId = 7702;
    for (let i = 0; i < LIMIT; i++) await use(numberId, recipient(i), T0 + i * 1_000);
    const gate = new SendQuotaGate(t.db.pool, logger, TTL);
    const holds = new QuotaHolds(gate);
    // recipient 0 leaves at T0 + 24 h, more than the reservation's 30 s after this request
    expect(await admit(gate, holds, numberId, recipient(0), T0 + DAY - TTL - 1)).toBeUndefined();
    expect(holds.reservations).toEqual([]);
    expect(holds.counted).toEqual([]);
    expect(await reservations(numberId)).toEqual([]);
    // a new recipient: the window is full
    expect(await admit(gate, new QuotaHolds(gate), numberId, recipient(LIMIT), T0 + DAY - TTL - 1)).toEqual({ used: LIMIT, dailyLimit: LIMIT });
  });

  it('a leaving recipient is reserved even with room left; exactly 24 h after its send it is out of the window', async () => {
    const numberId = 7703;
    const leaving = recipient(0);
    await use(numberId, leaving, T0);
    const gate = new SendQuotaGate(t.db.pool, logger, TTL); // TIER_50: always within the guard, so checked under the lock
    const holds = new QuotaHolds(gate);
    expect(await admit(gate, holds, numberId, leaving, T0 + DAY - 1)).toBeUndefined();
    expect(await reservations(numberId)).toEqual([leaving]);
    await holds.release();
    // exactly 24 h after its send it is out of the window: a new recipient like any other
    expect(await uniqueRecipientsSent24h(t.db.pool, numberId, new Date(T0 + DAY))).toBe(0);
    expect(await uniqueRecipientsSent24h(t.db.pool, numberId, new Date(T0 + DAY - 1))).toBe(1);
  });
});
