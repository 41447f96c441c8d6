import { randomUUID } from 'node:crypto';
import { claimRecipientsWithQuota } from '../../src/commands/bulk/work-claims';
import { SHOP } from '../support/sends';
import { createTestApp } from '../support/services';

// Regression review 18 (docs/reliability.md): since 8a3eff0 a quota reservation counts until both the judging
// process's clock and Postgres's have passed its expiry. A bulk dispatcher whose clock runs ahead was blocked by such a
// reservation (live by Postgres's clock, past by its own), and told to resume at the reservation's expiry: a time
// already past by its clock, so the paused bulk was due again at once, blocked again, for as long as the lead. It
// resumes no earlier than its next look (at most the window's 1 s) while the reservation still counts.

describe('regression review 18: a blocked bulk claim of a dispatcher whose clock runs ahead', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it("is told to resume later than its own now while another process's reservation still counts", async () => {
    const numberId = 9918;
    const machineNow = Date.now();
    // a single send in flight on another process, on time: its reservation for 30 s
    await t.db.pool.query(
      'INSERT INTO public.send_quota_reservations (reservation_id, number_id, recipient, expires_at) VALUES ($1, $2, $3, $4)',
      [randomUUID(), numberId, '+5491177180001', new Date(machineNow + 30_000)],
    );
    const bulkId = randomUUID();
    await t.db.pool.query(
      `INSERT INTO bulk_work.jobs (bulk_id, task_id, company_id, number_id, phone_number_id, template_name, language, template,
                                   chunk_count, recipient_count, state, created_at, updated_at)
       VALUES ($1, 'task', $2, $3, '1099180000', 'welcome', 'en', '{}', 1, 1, 'processing', $4, $4)`,
      [bulkId, SHOP.companyId, numberId, new Date(machineNow)],
    );
    await t.db.pool.query(
      `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables)
       VALUES ($1, 0, 0, $2, '+5491177180002', '+5491177180002', '{}', '{}')`,
      [bulkId, numberId],
    );
    // the dispatcher's clock 40 s ahead: the reservation is past by it, live by Postgres's; the tier has room for one
    const now = new Date(machineNow + 40_000);
    const claim = await claimRecipientsWithQuota(t.db.pool, {
      bulkId, dispatcher: 'ahead', now, leaseUntil: new Date(now.getTime() + 60_000), limit: 10, numberId, dailyLimit: 1,
    });
    expect({ claimed: claim.claimed, used: claim.used, blocked: claim.blocked }).toEqual({ claimed: [], used: 1, blocked: true });
    expect(claim.resumeAt).not.toBeNull();
    expect(claim.resumeAt!.getTime()).toBeGreaterThan(now.getTime());
  });
});
