import type { PoolClient } from 'pg';
import { accountsProjection, recordQuotaUse, recordQuotaUses } from '../../src/projections/accounts/projection';
import { createTestDatabase, type TestDatabase } from '../support/db';

// The set-based quota recording used for bulk dispatch windows (recordQuotaUses) leaves the accounts read
// model's quota tables exactly as recording the same uses one by one (recordQuotaUse) does.

const H = 3600_000;
const T0 = Date.parse('2026-03-01T10:00:00.000Z');

describe('recordQuotaUses (bulk windows) = recordQuotaUse one by one', () => {
  let db: TestDatabase;
  let one: PoolClient;
  let many: PoolClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    for (const schema of ['q_one', 'q_many']) {
      await db.pool.query(`CREATE SCHEMA ${schema}`);
      const c = await db.pool.connect();
      await c.query(`SET search_path TO ${schema}, public`);
      await c.query(accountsProjection.ddl);
      await c.query(`INSERT INTO numbers (number_id, company_id, phone_number_id, display_phone_number, verified_name, business_name, is_primary,
                                          tier, quality_rating, created_at, updated_at)
                     VALUES (7, 70, '700', '+54 11', 'V', 'B', true, 'TIER_1000', 'GREEN', now(), now())`);
      if (schema === 'q_one') one = c;
      else many = c;
    }
  });
  afterAll(async () => {
    one?.release();
    many?.release();
    await db?.drop();
  });

  const snapshot = async (c: PoolClient) => ({
    recipients: (await c.query('SELECT number_id, recipient, last_sent_at FROM quota_recipients ORDER BY number_id, recipient')).rows,
    minutes: (await c.query('SELECT number_id, minute, recipients FROM quota_minutes WHERE recipients <> 0 ORDER BY number_id, minute')).rows,
  });

  it('on random windows: repeats, older and newer sends, minute boundaries, pruning after a day', async () => {
    let seed = 42;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    let t = T0;
    for (let w = 0; w < 60; w++) {
      t += w === 40 ? 26 * H : Math.floor(rnd() * 40_000);
      const uses = Array.from({ length: 1 + Math.floor(rnd() * 30) }, () => ({
        recipient: `+54911000${String(Math.floor(rnd() * 60)).padStart(3, '0')}`,
        at: new Date(t - Math.floor(rnd() * 120_000)).toISOString(), // some older than what is stored
      }));
      for (const u of uses) await recordQuotaUse(one, { numberId: 7, ...u });
      await recordQuotaUses(many, 7, uses);
      await recordQuotaUses(many, 7, uses); // a redelivered event changes nothing
    }
    const a = await snapshot(one);
    const b = await snapshot(many);
    expect(b.recipients.length).toBeGreaterThan(10);
    expect(b).toEqual(a);
  });
});
