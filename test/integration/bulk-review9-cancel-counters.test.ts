import { cancelBulkSend } from '../../src/commands/bulk/cancel';
import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { ProviderError } from '../../src/ports/provider';
import { getBulkSend } from '../../src/projections/bulk/queries';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, countersFromRows, phones, RecordingProvider, sandbox, storedCounters, waitForBulk } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';
import { waitUntil } from '../support/sends';

// Review 9: two dispatchers share a bulk (every 97th recipient refused by the provider) and it
// is cancelled mid-way. At every read sent + failed + pending = total; no send starts after the cancel returned;
// afterwards the counters equal the provider's books: each recipient reached at most once, sent_count of them.

describe('bulk cancel with two dispatchers: counters add up at every read', () => {
  let t: TestContext;
  let provider: RecordingProvider;
  const running: BulkDispatcher[] = [];

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), () => new Date());
    t = await createTestContext({ provider });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await Promise.all(running.map((d) => d.stop()));
    await t?.close();
  });

  it('cancelled mid-way: every read adds up, nothing starts after the answer, the counters are the provider\'s', async () => {
    const list = phones(3000, '+549117');
    const refused = new Set(list.filter((_, i) => i % 97 === 0));
    const created = await createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: BULK_CO.unlimited.phoneNumberId,
      templateName: 'welcome', language: 'es', recipients: list.map((phone) => ({ phone })),
    });
    for (const id of ['a', 'b']) {
      const p = provider.sibling(id);
      p.hold = () => new Promise((r) => setTimeout(r, 1));
      p.fail = (req) => (refused.has(req.to) ? new ProviderError('131026', 'Message undeliverable', false) : undefined);
      const d = new BulkDispatcher(t.services, { id, pollMs: 10, unlimitedWindow: 50, concurrency: 4, provider: p });
      running.push(d);
      d.start();
    }

    const reads: Array<{ sent: number; failed: number; pending: number; total: number }> = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const b = await getBulkSend(t.db.pool, BULK_CO.companyId, created.bulkId);
        if (b) reads.push({ sent: b.sentCount, failed: b.failedCount, pending: b.pendingCount, total: b.totalRecipients });
        await new Promise((r) => setTimeout(r, 2));
      }
    })();

    await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (b) => b.sentCount >= 600);
    await cancelBulkSend(t.services, { companyId: BULK_CO.companyId, bulkId: created.bulkId, actor: 'test-key' });
    const callsAtAnswer = provider.calls.length;
    const cancelledAt = Date.now();

    // settled: nothing in flight, every outcome batch applied. Waited for, or the test fails saying so (a loop of 500
    // polls, about 10 s, carried on silently before: on a loaded machine the checks below then read a bulk mid-way)
    await waitUntil(async () => {
      const r = await t.db.pool.query<{ n: number; b: number }>(
        `SELECT count(*) FILTER (WHERE state = 'in_flight')::int AS n, (SELECT count(*)::int FROM bulk_work.outcome_batches WHERE bulk_id = $1) AS b
           FROM bulk_work.recipients WHERE bulk_id = $1`,
        [created.bulkId],
      );
      return (r.rows[0].n === 0 && r.rows[0].b === 0) || undefined;
    }, 45_000, 'the cancelled bulk to settle (no recipient in flight, no outcome batch left)');
    await t.services.runner.waitFor(await t.services.store.headPosition());
    await new Promise((r) => setTimeout(r, 100));
    polling = false;
    await poller;

    expect(reads.length).toBeGreaterThan(10);
    expect(reads.filter((x) => x.sent + x.failed + x.pending !== x.total)).toEqual([]);
    expect(provider.calls.slice(callsAtAnswer).filter((c) => c.at >= cancelledAt)).toEqual([]);

    const reached = list.filter((p) => (provider.perRecipient.get(p) ?? 0) > 0);
    expect(list.filter((p) => (provider.perRecipient.get(p) ?? 0) > 1)).toEqual([]);
    const calledRefused = provider.calls.filter((c) => refused.has(c.to)).length;
    const done = await getBulkSend(t.db.pool, BULK_CO.companyId, created.bulkId);
    expect(done).toMatchObject({ status: 'CANCELLED', sentCount: reached.length, failedCount: calledRefused });
    expect(done!.pendingCount).toBe(3000 - reached.length - calledRefused);
    expect(done!.pendingCount).toBeGreaterThan(0);
    expect(await storedCounters(t.db.pool, created.bulkId)).toEqual(await countersFromRows(t.db.pool, created.bulkId));
  }, 120_000); // the settle wait (45 s) and the sends before it, on a loaded machine
});
