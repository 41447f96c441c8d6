import type { Pool, PoolClient } from 'pg';
import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { quotaLockKey } from '../../src/commands/send/quota-gate';
import { ProviderError, type SendTemplateRequest } from '../../src/ports/provider';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, FakeClock, phones, RecordingProvider, sandbox, waitForBulk } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';

// The quota claim counts the rows of the window still being recorded as in flight (docs/bulk.md, Quota). When
// such a row ends refused, it used no quota: the dispatcher claims again once the recording settled instead of
// pausing the bulk for a day (2026-11-27). The race is made certain with locks, not with time: the refused
// recipient's row stays locked (its outcome cannot be written) until the next claim has counted the quota.

const START = Date.parse('2026-03-01T10:00:00.000Z');
const REFUSED = '+5491163990000';
const LAST = '+5491163990051';

/** The number's quota claim lock (the key claimRecipientsWithQuota takes, shared with the single sends' gate). */
const quotaKey = quotaLockKey;

interface HeldRecording {
  row: PoolClient;
  quota: PoolClient;
}

/** Locks a work row (its outcome waits) and the number's quota lock (the next claim waits). */
async function holdRecordingAndClaim(pool: Pool, bulkId: string, idx: number, numberId: number): Promise<HeldRecording> {
  const row = await pool.connect();
  await row.query('BEGIN');
  await row.query('SELECT 1 FROM bulk_work.recipients WHERE bulk_id = $1 AND idx = $2 FOR UPDATE', [bulkId, idx]);
  const quota = await pool.connect();
  await quota.query('SELECT pg_advisory_lock(hashtext($1))', [quotaKey(numberId)]);
  return { row, quota };
}

async function claimIsWaiting(pool: Pool, numberId: number): Promise<boolean> {
  const r = await pool.query(
    `SELECT count(*)::int AS n FROM pg_locks
      WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND objid::bigint = (hashtext($1)::bigint & 4294967295)`,
    [quotaKey(numberId)],
  );
  return r.rows[0].n > 0;
}

/** Lets the waiting claim count the quota (the row still in flight), waits for its end, then lets the outcome be written. */
async function releaseAfterTheNextClaim(pool: Pool, held: HeldRecording, numberId: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await claimIsWaiting(pool, numberId))) {
    if (Date.now() > deadline) throw new Error('the dispatcher never claimed again');
    await new Promise((r) => setTimeout(r, 10));
  }
  const key = quotaKey(numberId);
  await held.quota.query('SELECT pg_advisory_unlock(hashtext($1))', [key]); // the waiting claim takes it
  await held.quota.query('SELECT pg_advisory_lock(hashtext($1))', [key]); // granted once that claim committed
  await held.quota.query('SELECT pg_advisory_unlock(hashtext($1))', [key]);
  held.quota.release();
  await held.row.query('COMMIT');
  held.row.release();
}

describe('bulk dispatcher: quota counted while a window is being recorded', () => {
  let t: TestContext;
  const clock = new FakeClock(START);
  let provider: RecordingProvider;
  let dispatcher: BulkDispatcher | undefined;

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), clock.now);
    t = await createTestContext({ now: clock.now, provider });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await t?.close();
  });

  it('a recipient refused while the next claim counted it in flight uses no quota: the bulk goes on, no pause', async () => {
    const list = [...phones(49, '+54911630'), REFUSED, LAST]; // TIER_50: the 51st fits once the 50th is refused
    const created = await createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: BULK_CO.quota.phoneNumberId,
      templateName: 'welcome', language: 'es', recipients: list.map((phone) => ({ phone })),
    });
    let released: Promise<void> | undefined;
    provider.fail = (request: SendTemplateRequest) => (request.to === REFUSED ? new ProviderError('131026', 'Message undeliverable', false) : undefined);
    const refusing = Object.create(provider) as RecordingProvider;
    refusing.sendTemplate = async (request) => {
      if (request.to === REFUSED) {
        const held = await holdRecordingAndClaim(t.db.pool, created.bulkId, 49, BULK_CO.quota.id);
        released = releaseAfterTheNextClaim(t.db.pool, held, BULK_CO.quota.id);
      }
      return provider.sendTemplate(request);
    };
    dispatcher = new BulkDispatcher(t.services, { now: clock.now, sleep: clock.sleep, pollMs: 20, provider: refusing });
    dispatcher.start();

    const bulk = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (b) => b.paused || ['COMPLETED', 'PARTIAL', 'FAILED'].includes(b.status));
    await released;
    const pauses = await t.db.pool.query(`SELECT data FROM es.events WHERE type = 'BulkSendPaused' AND data->>'bulkId' = $1`, [created.bulkId]);
    expect(pauses.rows.map((r) => r.data)).toEqual([]);
    expect(bulk).toMatchObject({ status: 'PARTIAL', paused: false, sentCount: 50, failedCount: 1, pendingCount: 0 });
    expect(provider.perRecipient.get(LAST)).toBe(1);
    await t.services.runner.waitFor(await t.services.store.headPosition());
    const quota = await t.db.pool.query('SELECT count(*)::int AS n FROM rm_accounts.quota_recipients WHERE number_id = $1', [BULK_CO.quota.id]);
    expect(quota.rows[0].n).toBe(50);
  });
});
