import { randomUUID } from 'node:crypto';
import { claimRecipientsWithQuota } from '../../src/commands/bulk/work';
import { outcomeUnknownRecipientsSql } from '../../src/commands/bulk/work-unknown-outcomes';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { sendQuotaGateOf } from '../../src/commands/send/quota-gate';
import { migrate } from '../../src/adapters/postgres/migrations';
import { recordQuotaUse } from '../../src/projections/accounts/projection';
import { withTransaction } from '../../src/shared/tx';
import { createTestDatabase } from '../support/db';
import { BULK_CO, bulkFixture } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';

// Review 10 of 61fe5ed (failed rows whose outcome is unknown count in the number's 24 h window). Found sound: these
// tests pass. What they check: no double counting (read model + unknown row, two bulks, a sent row and an unknown one,
// a reservation and an unknown row), refusals and rows older than the window not counted, a single send's in_window for
// an unknown-failed recipient, the partial index used by generic plans, and migration 0016 on a database with rows.

const NOW = new Date('2026-03-01T10:00:00.000Z');
const minutesAgo = (m: number) => new Date(NOW.getTime() - m * 60_000);
const N = BULK_CO.quota.id;
const OTHER_N = BULK_CO.pacing.id;

describe('review 10: outcome-unknown rows in the quota window', () => {
  let t: TestContext;
  const bulkX = randomUUID();
  const bulkY = randomUUID();
  let idx = 0;

  const row = (bulkId: string, numberId: number, e164: string, state: string, errorCode: string | null, claimedAt: Date) =>
    t.db.pool.query(
      `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables, state, attempts,
                                         claimed_at, error_code, outcome_at)
       VALUES ($1, $2, 0, $3, $4, $4, '{}', '{}', $5, 1, $6, $7, $6)`,
      [bulkId, idx++, numberId, e164, state, claimedAt, errorCode],
    );

  beforeAll(async () => {
    t = await createTestContext({ now: () => NOW });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
    const A = '+5491177900001'; // sent (read model) and timed out in a bulk
    const B = '+5491177900002'; // timed out in bulk X, interrupted in bulk Y
    const C = '+5491177900003'; // refused (131026): sent nothing
    const D = '+5491177900004'; // timed out 25 h ago: out of the window
    const E = '+5491177900005'; // sent in bulk Y (work table only), connection lost in bulk X
    const F = '+5491177900006'; // internal_error on another number
    const G = '+5491177900007'; // a live reservation, and interrupted in bulk X
    await withTransaction(t.db.pool, async (tx) => {
      await tx.query('SET LOCAL search_path TO rm_accounts, public');
      await recordQuotaUse(tx, { numberId: N, recipient: A, at: minutesAgo(30) });
    });
    await row(bulkX, N, A, 'failed', 'timeout', minutesAgo(20));
    await row(bulkX, N, B, 'failed', 'timeout', minutesAgo(20));
    await row(bulkY, N, B, 'failed', 'interrupted', minutesAgo(10));
    await row(bulkX, N, C, 'failed', '131026', minutesAgo(20));
    await row(bulkX, N, D, 'failed', 'timeout', minutesAgo(25 * 60));
    await row(bulkY, N, E, 'sent', null, minutesAgo(10));
    await row(bulkX, N, E, 'failed', 'connection_lost', minutesAgo(20));
    await row(bulkX, OTHER_N, F, 'failed', 'internal_error', minutesAgo(20));
    await row(bulkX, N, G, 'failed', 'interrupted', minutesAgo(20));
    await t.db.pool.query(
      `INSERT INTO public.send_quota_reservations (reservation_id, number_id, recipient, expires_at) VALUES ($1, $2, $3, $4)`,
      [randomUUID(), N, G, new Date(NOW.getTime() + 60_000)],
    );
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a bulk claim counts each recipient once: A, B, E, G (not the refused, the old, the other number\'s)', async () => {
    const claim = await claimRecipientsWithQuota(t.db.pool, {
      bulkId: randomUUID(), dispatcher: 'probe', now: NOW, leaseUntil: new Date(NOW.getTime() + 60_000), limit: 10, numberId: N, dailyLimit: 50,
    });
    expect(claim).toMatchObject({ claimed: [], used: 4, blocked: false });
  });

  it('the single sends\' gate counts the same 4; in_window true for unknown-failed recipients only', async () => {
    const gate = sendQuotaGateOf(t.services) as unknown as { read(db: unknown, c: unknown): Promise<Record<string, unknown>> };
    const read = (recipient: string) => gate.read(t.db.pool, { numberId: N, tier: 'TIER_50', recipient, now: NOW });
    const b = await read('+5491177900002');
    expect(Number(b.used) + Number(b.reserved)).toBe(4);
    expect(b.in_window).toBe(true);
    expect((await read('+5491177900003')).in_window).toBe(false); // refused
    expect((await read('+5491177900004')).in_window).toBe(false); // out of the window
    expect((await read('+5491177900006')).in_window).toBe(false); // another number's
  });

  it('generic plans of the unknown-outcome subquery use the partial index', async () => {
    // many rows of the number that the index must skip
    await t.db.pool.query(
      `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables, state, attempts, claimed_at)
       SELECT $1, 1000 + g, 0, $2, '+54911' || (70000000 + g), '+54911' || (70000000 + g), '{}', '{}',
              CASE WHEN g % 3 = 0 THEN 'pending' WHEN g % 3 = 1 THEN 'sent' ELSE 'failed' END, 1, $3
         FROM generate_series(1, 30000) g`,
      [randomUUID(), N, minutesAgo(5)],
    );
    await t.db.pool.query('ANALYZE bulk_work.recipients');
    const client = await t.db.pool.connect();
    try {
      await client.query(`SET plan_cache_mode = force_generic_plan`);
      await client.query(`PREPARE review10_count(int, timestamptz) AS SELECT count(*) FROM (${outcomeUnknownRecipientsSql('$1', '$2')}) u`);
      await client.query(
        `PREPARE review10_exists(int, timestamptz, text) AS SELECT EXISTS (SELECT 1 FROM (${outcomeUnknownRecipientsSql('$1', '$2')}) u WHERE u.recipient = $3)`,
      );
      const since = new Date(NOW.getTime() - 24 * 3600_000).toISOString();
      const count = (await client.query(`EXPLAIN EXECUTE review10_count(${N}, '${since}')`)).rows.map((r) => r['QUERY PLAN']).join('\n');
      const exists = (await client.query(`EXPLAIN EXECUTE review10_exists(${N}, '${since}', '+5491177900002')`)).rows
        .map((r) => r['QUERY PLAN']).join('\n');
      expect(count).toContain('recipients_outcome_unknown');
      expect(exists).toContain('recipients_outcome_unknown');
    } finally {
      await client.query('DEALLOCATE ALL').catch(() => undefined);
      client.release();
    }
  });

  it('migration 0016 applies on a database that already has bulk rows (the index valid, its rows found)', async () => {
    const db = await createTestDatabase();
    try {
      await db.pool.query('DROP INDEX bulk_work.recipients_outcome_unknown');
      await db.pool.query('DELETE FROM public.schema_migrations WHERE version = 16');
      await db.pool.query(
        `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables, state, attempts, claimed_at, error_code)
         SELECT $1, g, 0, 7, '+54911' || (70000000 + g), '+54911' || (70000000 + g), '{}', '{}', 'failed', 1, now(),
                CASE WHEN g % 2 = 0 THEN 'timeout' ELSE '131026' END
           FROM generate_series(1, 2000) g`,
        [randomUUID()],
      );
      expect(await migrate(db.pool)).toEqual([16]);
      const idx = await db.pool.query(
        `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'recipients_outcome_unknown'`,
      );
      expect(idx.rows).toEqual([{ indisvalid: true }]);
      const n = await db.pool.query(`SELECT count(*)::int AS n FROM (${outcomeUnknownRecipientsSql('7', `now() - interval '1 day'`)}) u`);
      expect(n.rows[0].n).toBe(1000);
    } finally {
      await db.drop();
    }
  });
});
