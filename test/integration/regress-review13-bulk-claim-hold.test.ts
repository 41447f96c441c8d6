import { randomUUID } from 'node:crypto';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import { claimRecipientsWithQuota } from '../../src/commands/bulk/work';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { type MessagingProvider, ProviderError, type SendTemplateRequest, type SendTemplateResult } from '../../src/ports/provider';
import { createTestApp } from '../support/services';
import { SHOP, sendsFixture } from '../support/sends';

// Regression review 13 (aec4f7e). A keyed send answered 503 SEND_OUTCOME_UNKNOWN holds its recipient in the quota for
// the 24 h from its request (QuotaHolds.keepForOutcomeUnknown), also "when it was admitted without one: ... in the
// window already" (a recipient the number sent to less than 24 h before). A bulk claim of the same number near its
// limit deletes, on the way, every reservation whose recipient the read model has in the window
// (src/commands/bulk/work-claims.ts, reserveClaimed): such a hold too. Once the earlier send leaves the window, the
// 503's send (which may have reached the recipient) counts nowhere for the rest of its 24 h.
// Fixed (work-claims.ts: a reservation outlasting the read model's entry stays); without the fix the hold is gone
// after the claim and GET business-accounts shows 0 used, not 1 (checked 2026-11-28).

const T0 = Date.parse('2026-04-01T10:00:00.000Z');
const HOUR = 3_600_000;
const SEND = '/api/v1/platform-templates/send/';

class ScriptedProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  failNext = false;
  private readonly sandbox = new SandboxProvider({ delivery: 'off' });
  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    if (this.failNext) throw new ProviderError('timeout', 'scripted timeout', true);
    return this.sandbox.sendTemplate(request);
  }
}

describe('regress-review13: a bulk claim and a keyed 503 hold of a recipient in the window', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let clock = T0;
  const provider = new ScriptedProvider();
  const n = SHOP.smallNumber; // TIER_50

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(clock), provider });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const send = (to: string, key?: string) =>
    t.app.inject({
      method: 'POST', url: SEND, headers: { 'x-api-key': SHOP.key, ...(key ? { 'idempotency-key': key } : {}) },
      payload: { phone_number_id: n.phoneNumberId, template_name: 'welcome', recipient_phone: to },
    });
  const used = async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/business-accounts/', headers: { 'x-api-key': SHOP.key } });
    return res.json().phoneNumbers.find((p: { id: number }) => p.id === n.id).quota.uniqueNumbersSent24h as number;
  };
  const holds = async (recipient: string) =>
    (await t.db.pool.query<{ expires_at: Date }>('SELECT expires_at FROM public.send_quota_reservations WHERE number_id = $1 AND recipient = $2', [n.id, recipient]))
      .rows.map((r) => r.expires_at.getTime());

  it('the hold still counts the recipient once the earlier send left the window', async () => {
    const r = '+5491170001231';
    expect((await send(r)).statusCode).toBe(200); // in the window from T0
    clock = T0 + 23 * HOUR;
    provider.failNext = true;
    const unknown = await send(r, 'k-hold-1');
    provider.failNext = false;
    expect(unknown.statusCode).toBe(503);
    expect(await holds(r)).toEqual([T0 + 47 * HOUR]); // held for the 24 h from the 503's request

    // a bulk of the number claims a new recipient near the limit
    const bulkId = randomUUID();
    const at = new Date(clock);
    await t.db.pool.query(
      `INSERT INTO bulk_work.jobs (bulk_id, task_id, company_id, number_id, phone_number_id, template_name, language, template,
                                   chunk_count, recipient_count, state, created_at, updated_at)
       VALUES ($1, 'task', $2, $3, $4, 'welcome', 'en', '{}', 1, 1, 'processing', $5, $5)`,
      [bulkId, SHOP.companyId, n.id, n.phoneNumberId, at],
    );
    await t.db.pool.query(
      `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables)
       VALUES ($1, 0, 0, $2, '+5491170009991', '+5491170009991', '{}', '{}')`,
      [bulkId, n.id],
    );
    const claim = await claimRecipientsWithQuota(t.db.pool, {
      bulkId, dispatcher: 'probe', now: at, leaseUntil: new Date(clock + 60_000), limit: 10, numberId: n.id, dailyLimit: 50,
    });
    expect(claim.claimed).toHaveLength(1);

    // an hour later the first send left the window; the 503's send (maybe sent at T0 + 23 h) still counts
    clock = T0 + 24 * HOUR + 60_000;
    expect(await used()).toBe(1);
    expect(await holds(r)).toEqual([T0 + 47 * HOUR]);
  }, 120_000);
});
