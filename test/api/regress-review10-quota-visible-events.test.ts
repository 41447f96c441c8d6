import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { sendQuotaGateOf } from '../../src/commands/send/quota-gate';
import { accountsProjection } from '../../src/projections/accounts/projection';
import { checksumProjection, rebuildProjection } from '../../src/projections/rebuild';
import { START as LOG_START } from '../../src/ports/event-store';
import { ProviderError } from '../../src/ports/provider';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, FakeClock, phones, RecordingProvider, sandbox, sweepBulkLeasesNow, waitForBulk } from '../support/bulk';
import { chunksOf, fillProjection } from '../support/projections';
import { createTestApp } from '../support/services';

// Review 10 of 61fe5ed, through the events (test/api/regress-review10-quota-visible.test.ts writes work rows only).
// Bulk recipients whose outcome is unknown (timeout, connection lost, unexpected failure, interrupted) count in the
// number's 24 h window for the quota gates; the quota the API shows must count them too. Fixed: their
// `BulkRecipientsRejected` carries `numberId` and `recipientE164`, and the accounts read model records them as sent.
// Without the fix: uniqueNumbersSent24h 1 (only the accepted one), then 0 on the second number.

const START = Date.parse('2026-03-01T10:00:00.000Z');
const LEASE = 60_000;

describe('review 10: outcome-unknown bulk recipients are in the quota the API shows', () => {
  const clock = new FakeClock(START);
  const provider = new RecordingProvider(sandbox(), clock.now);
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const running: BulkDispatcher[] = [];
  let release: () => void = () => undefined;

  beforeAll(async () => {
    t = await createTestApp({ now: clock.now, provider });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    release();
    await Promise.all(running.map((d) => d.stop()));
    await t?.close();
  });

  const bulk = (phoneNumberId: string, list: string[]) =>
    createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId, templateName: 'welcome', language: 'es',
      recipients: list.map((phone) => ({ phone })),
    });
  const dispatcher = (id: string) => {
    const d = new BulkDispatcher(t.services, { id, now: clock.now, sleep: clock.sleep, pollMs: 20, recipientLeaseMs: LEASE, provider });
    running.push(d);
    d.start();
    return d;
  };
  const quotaOf = async (numberId: number) => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/business-accounts/', headers: { 'x-api-key': BULK_CO.key } });
    expect(res.statusCode).toBe(200);
    return res.json().phoneNumbers.find((p: { id: number }) => p.id === numberId).quota;
  };
  /** the quota once the accounts read model has applied the log (it follows the bulk read model asynchronously) */
  const settledQuotaOf = async (numberId: number, used: number) => {
    const deadline = Date.now() + 15_000;
    let quota = await quotaOf(numberId);
    while (quota.uniqueNumbersSent24h !== used && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      quota = await quotaOf(numberId);
    }
    return quota;
  };

  const list = phones(5, '+54911790');
  it('timeout, connection lost and an unexpected failure count as sent; a refusal does not', async () => {
    provider.fail = (req) =>
      req.to === list[0] ? new ProviderError('timeout', 'the provider did not answer in time', true)
        : req.to === list[1] ? new ProviderError('connection_lost', 'the connection was lost', true)
          : req.to === list[2] ? new Error('boom')
            : req.to === list[3] ? new ProviderError('131026', 'Message undeliverable', false) : undefined;
    const created = await bulk(BULK_CO.pacing.phoneNumberId, list);
    dispatcher('d1');
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (b) => b.status === 'PARTIAL');
    provider.fail = undefined;
    expect(done).toMatchObject({ failedCount: 4, sentCount: 1 });

    expect(await settledQuotaOf(BULK_CO.pacing.id, 4)).toMatchObject({ uniqueNumbersSent24h: 4, remaining: 46, canSend: true });
    // the single sends' gate counts each of them once (read model and work table alike)
    const gate = sendQuotaGateOf(t.services) as unknown as { read(db: unknown, c: unknown): Promise<{ used: number; reserved: number }> };
    const read = await gate.read(t.db.pool, { numberId: BULK_CO.pacing.id, tier: 'TIER_50', recipient: '+5491177000009', now: clock.now() });
    expect(Number(read.used) + Number(read.reserved)).toBe(4);
  });

  it('a recipient the lease sweep resolves as interrupted counts too', async () => {
    const one = phones(1, '+54911791');
    let reached!: () => void;
    const atCrash = new Promise<void>((resolve) => { reached = resolve; });
    const stuck = new Promise<void>((resolve) => { release = resolve; });
    provider.hold = (req) => (req.to === one[0] ? (reached(), stuck) : undefined);
    await bulk(BULK_CO.quota.phoneNumberId, one);
    const d = dispatcher('d2');
    await atCrash;
    d.kill();
    provider.hold = undefined;
    clock.advance(LEASE + 5 * 60_000);
    expect(await sweepBulkLeasesNow(t.services, { flushGraceMs: 0 })).toMatchObject({ interrupted: 1 });
    expect(await settledQuotaOf(BULK_CO.quota.id, 1)).toMatchObject({ uniqueNumbersSent24h: 1, remaining: 49 });
  });

  it('a rebuild of the accounts read model gives the same quotas', async () => {
    await rebuildProjection(t.db.pool, t.services.store, accountsProjection, {});
    expect(await quotaOf(BULK_CO.pacing.id)).toMatchObject({ uniqueNumbersSent24h: 4 });
    expect(await quotaOf(BULK_CO.quota.id)).toMatchObject({ uniqueNumbersSent24h: 1 });
  });

  it('applyBatch leaves the rows of apply one event at a time, also with a batch redelivered', async () => {
    const log = (await t.services.store.readAll(LOG_START, 100_000)).events;
    expect(log.filter((e) => e.type === 'BulkRecipientsRejected').length).toBeGreaterThan(1);
    const p = accountsProjection;
    await fillProjection(t.db.pool, { ...p, applyBatch: undefined }, `${p.schema}__one`, chunksOf(log, 1));
    const expected = await checksumProjection(t.db.pool, p, `${p.schema}__one`);
    expect(await checksumProjection(t.db.pool, p)).toBe(expected);
    for (const size of [log.length, 2, 3]) {
      const batches = chunksOf(log, size);
      batches.splice(Math.floor(batches.length / 2), 0, batches[Math.floor(batches.length / 3)]);
      await fillProjection(t.db.pool, p, `${p.schema}__batch`, batches);
      expect(await checksumProjection(t.db.pool, p, `${p.schema}__batch`)).toBe(expected);
    }
  });
});
