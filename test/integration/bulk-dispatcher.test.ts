import { cancelBulkSend } from '../../src/commands/bulk/cancel';
import { createBulkSend, type CreateBulkInput } from '../../src/commands/bulk/create';
import { randomUUID } from 'node:crypto';
import { batchEventId, flushBatches, getJob, insertDraftJob, requestCancel } from '../../src/commands/bulk/work';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { ProviderError } from '../../src/ports/provider';
import { PROVIDER_WEBHOOK_TOPIC, splitWebhook, statusWebhook } from '../../src/shared/provider-webhook';
import { BulkDispatcher, type BulkDispatcherOptions } from '../../src/workers/bulk-dispatcher';
import { startBulkLeaseCron } from '../../src/workers/bulk-lease-cron';
import { createDeliveryBatchHandler, createDeliveryHandler, startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import {
  BULK_CO, bulkFixture, countersFromRows, FakeClock, outcomeCounts, phones, RecordingProvider, sandbox, storedCounters, sweepBulkLeasesNow, waitForBulk,
} from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';
import { chunksOf, fillProjection } from '../support/projections';
import { START as START_POSITION } from '../../src/ports/event-store';
import { bulkProjection } from '../../src/projections/bulk/projection';
import { checksumProjection } from '../../src/projections/rebuild';

// The bulk dispatcher on real Postgres with a fake clock (pacing, quota windows and leases without waiting)
// and the sandbox provider behind a recorder (sends per recipient).

const START = Date.parse('2026-03-01T10:00:00.000Z');
const LEASE = 60_000;

describe('bulk dispatcher', () => {
  let t: TestContext;
  const clock = new FakeClock(START);
  let provider: RecordingProvider;
  const running: BulkDispatcher[] = [];

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), clock.now);
    t = await createTestContext({ now: clock.now, provider });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((d) => d.stop()));
    provider.hold = undefined;
    provider.fail = undefined;
  });
  afterAll(async () => {
    await t?.close();
  });

  const dispatcher = (options: BulkDispatcherOptions = {}) => {
    const d = new BulkDispatcher(t.services, { now: clock.now, sleep: clock.sleep, pollMs: 20, recipientLeaseMs: LEASE, provider, ...options });
    running.push(d);
    d.start();
    return d;
  };
  const create = (numberId: string, recipients: unknown[], over: Partial<CreateBulkInput> = {}) =>
    createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: numberId, templateName: 'welcome',
      language: 'es', recipients, ...over,
    });
  const finished = (b: { status: string }) => ['COMPLETED', 'PARTIAL', 'FAILED', 'CANCELLED'].includes(b.status);
  const sendsTo = (list: string[]) => list.map((p) => provider.perRecipient.get(p) ?? 0);
  const eventsOfType = async (type: string, bulkId: string) =>
    (await t.db.pool.query(`SELECT data FROM es.events WHERE type = $1 AND data->>'bulkId' = $2 ORDER BY tx_id, seq`, [type, bulkId])).rows.map((r) => r.data);
  /** the recipients of a bulk's outcome events of one type, in index order */
  const outcomesOfType = async (type: 'BulkRecipientsDispatched' | 'BulkRecipientsRejected', bulkId: string) =>
    (await eventsOfType(type, bulkId)).flatMap((e) => e.recipients).sort((a, b) => a.index - b.index);
  /** A bulk of `count` recipients sent to the end and projected: its recipients' phones and provider message ids, by index. */
  const dispatchedBulk = async (count: number, prefix: string) => {
    const list = phones(count, prefix);
    const created = await create(BULK_CO.unlimited.phoneNumberId, list.map((phone) => ({ phone })));
    dispatcher();
    await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
    await t.services.runner.waitFor(await t.services.store.headPosition());
    const ids = (await outcomesOfType('BulkRecipientsDispatched', created.bulkId)).map((e) => e.providerMessageId as string);
    return { bulkId: created.bulkId, list, ids };
  };
  /** The provider's notifications of (recipient index, status) as the consumer receives them, offsets from `firstOffset`. */
  const statusRecords = (bulk: { list: string[]; ids: string[] }, sequence: Array<[number, 'delivered' | 'read' | 'failed']>, ts: string, firstOffset = 0) => {
    const body = statusWebhook(sequence.map(([i, status]) => ({
      phoneNumberId: BULK_CO.unlimited.phoneNumberId, providerMessageId: bulk.ids[i], status, timestamp: ts, recipientId: bulk.list[i].slice(1),
      ...(status === 'failed' ? { errors: [{ code: 131047, title: 'Re-engagement message', message: 'Re-engagement message' }] } : {}),
    })) as never);
    return splitWebhook(body, new Date(START).toISOString())!
      .map((r, k) => ({ ...r, topic: PROVIDER_WEBHOOK_TOPIC, partition: 0, offset: String(firstOffset + k) }));
  };

  it('removes repeated phones and sends each recipient once', async () => {
    const list = phones(3, '+54911610');
    const created = await create(BULK_CO.unlimited.phoneNumberId, [...list, list[0], list[1]].map((phone) => ({ phone })));
    expect([created.totalRecipients, created.uniqueRecipients]).toEqual([5, 3]);
    dispatcher();
    const bulk = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
    expect(bulk).toMatchObject({ status: 'COMPLETED', submittedRecipients: 5, totalRecipients: 3, sentCount: 3, pendingCount: 0, failedCount: 0 });
    expect(sendsTo(list)).toEqual([1, 1, 1]);
  });

  it('paces a TIER_50 number at 1.2 s between sends (fake clock)', async () => {
    const list = phones(5, '+54911620');
    const created = await create(BULK_CO.pacing.phoneNumberId, list.map((phone) => ({ phone })));
    expect(created.estimatedTimeMinutes).toBe(0.1); // 5 × 1.2 s
    dispatcher();
    await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
    const starts = provider.calls.filter((c) => list.includes(c.to)).map((c) => c.at);
    expect(starts).toHaveLength(5);
    const gaps = starts.slice(1).map((s, i) => s - starts[i]);
    for (const gap of gaps) expect(Math.abs(gap - 1200) / 1200).toBeLessThanOrEqual(0.05);
    expect(gaps).toEqual([1200, 1200, 1200, 1200]);
  });

  it('pauses when the 24 h quota is used up and resumes when the window moves', async () => {
    const list = phones(53, '+54911630');
    const created = await create(BULK_CO.quota.phoneNumberId, list.map((phone) => ({ phone })));
    expect(created.quota).toEqual({ canSend: true, needed: 53, available: 50, total: 50, tier: 'TIER_50' });
    const d = dispatcher();
    const paused = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (b) => b.paused);
    expect(paused).toMatchObject({ status: 'PROCESSING', sentCount: 50, pendingCount: 3 });
    const [pause] = await eventsOfType('BulkSendPaused', created.bulkId);
    expect(pause).toMatchObject({ reason: 'quota', quotaUsed: 50, quotaLimit: 50 });
    expect(Date.parse(pause.resumeAt)).toBeGreaterThan(clock.t + 23 * 3600_000);

    // recipients already in the window are no new quota: a second bulk to two of them goes out while paused
    const again = await create(BULK_CO.quota.phoneNumberId, [{ phone: list[0] }, { phone: list[1] }, { phone: '+5491163999999' }]);
    const partly = await waitForBulk(t.db.pool, BULK_CO.companyId, again.bulkId, (b) => b.paused);
    expect(partly).toMatchObject({ sentCount: 2, pendingCount: 1 });
    expect(provider.perRecipient.get('+5491163999999')).toBeUndefined();

    // nothing moves until the window frees room
    await new Promise((r) => setTimeout(r, 150));
    expect((await storedCounters(t.db.pool, created.bulkId)).pending_count).toBe(3);

    clock.advance(24 * 3600_000);
    d.kick();
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
    expect(done).toMatchObject({ status: 'COMPLETED', sentCount: 53, pendingCount: 0, paused: false });
    expect(await eventsOfType('BulkSendResumed', created.bulkId)).toHaveLength(1);
    await waitForBulk(t.db.pool, BULK_CO.companyId, again.bulkId, finished);
    expect(sendsTo(list).every((n) => n === 1 || n === 2)).toBe(true);
    expect(sendsTo([list[0], list[1], list[2]])).toEqual([2, 2, 1]);
  });

  it('survives a dispatcher killed mid-bulk: every recipient gets exactly one outcome, none is sent twice', async () => {
    const list = phones(120, '+54911640');
    let reached!: () => void;
    const atCrash = new Promise<void>((resolve) => { reached = resolve; });
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => { release = resolve; });
    // the provider accepts recipient #50, then its answer never comes back: the process dies meanwhile
    provider.hold = (req) => (req.to === list[50] ? (reached(), stuck) : undefined);
    const created = await create(BULK_CO.busy.phoneNumberId, list.map((phone) => ({ phone })));
    const d1 = dispatcher({ unlimitedWindow: 10, concurrency: 4 });
    await atCrash;
    d1.kill();
    provider.hold = undefined;

    // a live dispatcher sends the rest but does not touch rows leased to the dead one until the lease runs out
    const d2 = dispatcher({ unlimitedWindow: 10, id: 'd2' });
    const stranded = async () => {
      const r = await t.db.pool.query(
        `SELECT count(*) FILTER (WHERE state = 'pending')::int AS pending, array_agg(idx ORDER BY idx) FILTER (WHERE state = 'in_flight') AS in_flight,
                count(*) FILTER (WHERE state = 'in_flight' AND dispatcher = 'd2')::int AS live_in_flight,
                (SELECT coalesce(sum(cardinality(idxs)), 0)::int FROM bulk_work.outcome_batches b WHERE b.bulk_id = $1) AS unappended
           FROM bulk_work.recipients WHERE bulk_id = $1`,
        [created.bulkId],
      );
      const b = await storedCounters(t.db.pool, created.bulkId);
      const inFlight: number[] = r.rows[0].in_flight ?? [];
      // the rest is done; what the dead one held is in flight, or recorded without its event (the flush appends it)
      // (and the live dispatcher holds nothing: a loaded machine may still be recording its last window)
      return r.rows[0].pending === 0 && r.rows[0].live_in_flight === 0 && b.pending_count === inFlight.length + r.rows[0].unappended ? inFlight : undefined;
    };
    let inFlight: number[] | undefined;
    for (let i = 0; i < 500 && !(inFlight = await stranded()); i++) await new Promise((r) => setTimeout(r, 20));
    // the window being sent (50-59) and possibly the one being recorded when the process died
    expect(inFlight).toEqual(expect.arrayContaining([50, 51, 52, 53, 54, 55, 56, 57, 58, 59]));
    expect(inFlight!.every((i) => i >= 40 && i < 60)).toBe(true);

    clock.advance(LEASE + 1);
    const report = await sweepBulkLeasesNow(t.services, { flushGraceMs: 0 });
    expect(report).toMatchObject({ skipped: false, interrupted: inFlight!.length });
    d2.kick();
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
    expect(done).toMatchObject({ status: 'PARTIAL', sentCount: 120 - inFlight!.length, failedCount: inFlight!.length, pendingCount: 0 });

    // the dead dispatcher's late answer changes nothing
    release();
    await new Promise((r) => setTimeout(r, 100));
    const outcomes = await outcomeCounts(t.db.pool, created.bulkId);
    expect(outcomes.size).toBe(120);
    expect([...outcomes.values()].every((types) => types.length === 1)).toBe(true);
    expect(sendsTo(list).every((n) => n <= 1)).toBe(true);
    expect(sendsTo(list.filter((_, i) => !inFlight!.includes(i))).every((n) => n === 1)).toBe(true);
    const rejected = await outcomesOfType('BulkRecipientsRejected', created.bulkId);
    expect(rejected.map((r) => r.index)).toEqual(inFlight);
    expect(rejected[0]).toMatchObject({ code: 'interrupted', message: 'interrupted, outcome unknown', interrupted: true });
    expect(await storedCounters(t.db.pool, created.bulkId)).toEqual(await countersFromRows(t.db.pool, created.bulkId));
  });

  it('two dispatchers on one bulk share it without sending anything twice', async () => {
    const list = phones(400, '+54911650');
    const created = await create(BULK_CO.unlimited.phoneNumberId, list.map((phone) => ({ phone })));
    const slow = (p: RecordingProvider) => {
      p.hold = () => new Promise((r) => setTimeout(r, 1));
      return p;
    };
    dispatcher({ unlimitedWindow: 20, concurrency: 4, id: 'a', provider: slow(provider.sibling('a')) });
    dispatcher({ unlimitedWindow: 20, concurrency: 4, id: 'b', provider: slow(provider.sibling('b')) });
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
    expect(done).toMatchObject({ status: 'COMPLETED', sentCount: 400 });
    expect(sendsTo(list).every((n) => n === 1)).toBe(true);
    const by = new Set(provider.calls.filter((c) => list.includes(c.to)).map((c) => c.by));
    expect(by).toEqual(new Set(['a', 'b']));
    expect(await eventsOfType('BulkSendFinished', created.bulkId)).toHaveLength(1);
    expect(await eventsOfType('BulkSendStarted', created.bulkId)).toHaveLength(1);
  });

  it('cancels mid-way: stops further sends and keeps what was sent', async () => {
    const list = phones(50, '+54911660');
    let reached!: () => void;
    const atTen = new Promise<void>((resolve) => { reached = resolve; });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    provider.hold = (req) => (req.to === list[9] ? (reached(), gate) : undefined);
    const created = await create(BULK_CO.unlimited.phoneNumberId, list.map((phone) => ({ phone })));
    dispatcher({ unlimitedWindow: 5, concurrency: 1 });
    await atTen;
    const cancelled = cancelBulkSend(t.services, { companyId: BULK_CO.companyId, bulkId: created.bulkId, actor: 'test-key' });
    await cancelled;
    release();
    const bulk = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (b) => b.status === 'CANCELLED' && b.sentCount === 10);
    await new Promise((r) => setTimeout(r, 150));
    expect(sendsTo(list)).toEqual([...Array(10).fill(1), ...Array(40).fill(0)]);
    expect(await getCounters(created.bulkId)).toMatchObject({ sent_count: 10, pending_count: 40 });
    expect(bulk.completedAt).not.toBeNull();
    await expect(cancelBulkSend(t.services, { companyId: BULK_CO.companyId, bulkId: created.bulkId, actor: 'test-key' }))
      .rejects.toMatchObject({ code: 'BULK_FINISHED' });
    expect(await eventsOfType('BulkSendFinished', created.bulkId)).toHaveLength(0);
  });

  const getCounters = (bulkId: string) => storedCounters(t.db.pool, bulkId);

  it('retries retryable provider errors with backoff; refusals fail the recipient; all failed is FAILED', async () => {
    const list = phones(3, '+54911670');
    provider.fail = (req, attempt) =>
      req.to === list[1] && attempt <= 2 ? new ProviderError('131000', 'Something went wrong', true) : undefined;
    const before = clock.t;
    const created = await create(BULK_CO.unlimited.phoneNumberId, [...list, '+5491167990000'].map((phone) => ({ phone })));
    dispatcher({ retryBaseMs: 2000 });
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
    expect(done).toMatchObject({ status: 'PARTIAL', sentCount: 3, failedCount: 1 });
    const dispatched = await outcomesOfType('BulkRecipientsDispatched', created.bulkId);
    expect(dispatched.find((e) => e.recipientPhone === list[1])).toMatchObject({ attempts: 3 });
    expect(clock.t - before).toBeGreaterThanOrEqual(2000 + 4000); // slept the backoff on the fake clock
    const [refused] = await outcomesOfType('BulkRecipientsRejected', created.bulkId);
    expect(refused).toMatchObject({ recipientPhone: '+5491167990000', code: '131026', message: 'Message undeliverable', interrupted: false });

    const allBad = await create(BULK_CO.unlimited.phoneNumberId, [{ phone: '+5491167910000' }, { phone: '+5491167920000' }]);
    expect(await waitForBulk(t.db.pool, BULK_CO.companyId, allBad.bulkId, finished)).toMatchObject({ status: 'FAILED', failedCount: 2 });
  });

  it('re-appending outcome batches after a crash between the work rows and the event creates no second outcome', async () => {
    const list = phones(30, '+54911680');
    const created = await create(BULK_CO.unlimited.phoneNumberId, list.map((phone) => ({ phone })));
    dispatcher({ unlimitedWindow: 7 });
    await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
    const chunkEvents = async () =>
      (await t.db.pool.query(`SELECT type, data, metadata FROM es.events WHERE stream_id LIKE $1 AND type = 'BulkRecipientsDispatched' ORDER BY tx_id, seq`,
        [`bulkchunk-${created.bulkId}-%`])).rows;
    const before = await chunkEvents();
    expect(before.length).toBe(5); // windows of 7, 7, 7, 7, 2
    // as if the process died after appending two batches but before deleting them: put them back as they were
    const last = (await t.db.pool.query(`SELECT last_value::int AS v FROM bulk_work.outcome_batches_id_seq`)).rows[0].v;
    const byEventId = new Map(Array.from({ length: last }, (_, i) => [batchEventId(created.bulkId, String(i + 1)), i + 1]));
    for (const e of before.slice(0, 2)) {
      await t.db.pool.query(
        `INSERT INTO bulk_work.outcome_batches (id, bulk_id, chunk, kind, idxs, created_at) VALUES ($1, $2, $3, 'sent', $4, now())`,
        [byEventId.get(e.metadata.eventId), created.bulkId, e.data.chunk, e.data.recipients.map((r: { index: number }) => r.index)],
      );
    }
    expect(await flushBatches(t.services, { bulkId: created.bulkId })).toBe(before[0].data.recipients.length + before[1].data.recipients.length);
    expect((await t.db.pool.query(`SELECT count(*)::int AS n FROM bulk_work.outcome_batches WHERE bulk_id = $1`, [created.bulkId])).rows[0].n).toBe(0);
    expect((await chunkEvents()).length).toBe(5);
    const outcomes = await outcomeCounts(t.db.pool, created.bulkId);
    expect(outcomes.size).toBe(30);
    expect([...outcomes.values()].every((types) => types.length === 1)).toBe(true);
  });

  it('the lease sweep completes cut-short creations and cancellations, and runs on its cron schedule', async () => {
    const { pool } = t.db;
    const job = (bulkId: string) => pool.query('SELECT state, cancel_requested FROM bulk_work.jobs WHERE bulk_id = $1', [bulkId]).then((r) => r.rows[0]);
    // died before the commit point: a draft job without BulkSendCreated
    const orphan = randomUUID();
    await insertDraftJob(pool, {
      bulkId: orphan, taskId: 't', companyId: BULK_CO.companyId, numberId: BULK_CO.unlimited.id, phoneNumberId: BULK_CO.unlimited.phoneNumberId,
      templateName: 'welcome', language: 'es', template: { variables: [], buttons: [] }, chunkCount: 1, recipientCount: 1, createdAt: clock.now(),
    });
    // died after it: the job is still a draft
    const late = await create(BULK_CO.unlimited.phoneNumberId, [{ phone: '+5491169900001' }]);
    await pool.query(`UPDATE bulk_work.jobs SET state = 'draft' WHERE bulk_id = $1`, [late.bulkId]);
    // a cancel that died between its flag and its event
    const halfCancelled = await create(BULK_CO.unlimited.phoneNumberId, [{ phone: '+5491169900002' }]);
    await requestCancel(pool, halfCancelled.bulkId, clock.now());
    clock.advance(1);

    const report = await sweepBulkLeasesNow(t.services, { staleMs: 0 });
    expect(report).toMatchObject({ draftsPromoted: 1, draftsDeleted: 1, cancelsCompleted: 1 });
    expect(await job(orphan)).toBeUndefined();
    expect(await job(late.bulkId)).toEqual({ state: 'queued', cancel_requested: false });
    expect(await job(halfCancelled.bulkId)).toEqual({ state: 'cancelled', cancel_requested: true });
    await t.services.runner.waitFor(await t.services.store.headPosition());
    expect((await storedCounters(pool, halfCancelled.bulkId)).pending_count).toBe(1);
    expect(await waitForBulk(pool, BULK_CO.companyId, halfCancelled.bulkId, (b) => b.status === 'CANCELLED')).toBeDefined();
    dispatcher();
    expect(await waitForBulk(pool, BULK_CO.companyId, late.bulkId, finished)).toMatchObject({ status: 'COMPLETED', sentCount: 1 });

    // on its schedule (every second here)
    const again = randomUUID();
    await insertDraftJob(pool, { ...(await getJob(pool, late.bulkId))!, bulkId: again, createdAt: new Date(clock.t - 1) });
    const cron = startBulkLeaseCron(t.services, { schedule: '* * * * * *', staleMs: 0 });
    try {
      for (let i = 0; i < 150 && (await job(again)); i++) await new Promise((r) => setTimeout(r, 20));
      expect(await job(again)).toBeUndefined();
    } finally {
      await cron.stop();
    }
  });

  it('applies delivery statuses to bulk recipients; counters match the rows at every step', async () => {
    const consumer = await startDeliveryConsumer(t.services, { ownerGraceMs: 2000, ownerWaitMs: 50 });
    try {
      const list = phones(4, '+54911690');
      const created = await create(BULK_CO.unlimited.phoneNumberId, list.map((phone) => ({ phone })));
      dispatcher();
      await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, finished);
      const ids = (await outcomesOfType('BulkRecipientsDispatched', created.bulkId)).map((e) => e.providerMessageId as string);
      const ts = String(Math.floor(START / 1000) + 60);
      const publish = async (id: string, status: 'delivered' | 'read' | 'failed') => {
        const body = statusWebhook([{
          phoneNumberId: BULK_CO.unlimited.phoneNumberId, providerMessageId: id, status, timestamp: ts, recipientId: '5491169010000',
          ...(status === 'failed' ? { errors: [{ code: 131047, title: 'Re-engagement message', message: 'Re-engagement message' }] } : {}),
        } as never]);
        await t.services.transport.publish(PROVIDER_WEBHOOK_TOPIC, splitWebhook(body, new Date(START).toISOString()) ?? []);
        await t.services.runner.waitFor(await t.services.store.headPosition());
        expect(await storedCounters(t.db.pool, created.bulkId)).toEqual(await countersFromRows(t.db.pool, created.bulkId));
      };
      await publish(ids[0], 'delivered');
      await publish(ids[0], 'delivered'); // duplicate: nothing
      await publish(ids[0], 'read');
      await publish(ids[1], 'read'); // read without delivered implies delivered
      await publish(ids[2], 'delivered');
      await publish(ids[2], 'failed');
      await publish(ids[1], 'delivered'); // late: nothing
      expect(await storedCounters(t.db.pool, created.bulkId)).toEqual({
        pending_count: 0, sent_count: 4, delivered_count: 3, read_count: 2, failed_count: 1,
      });
      const rows = await t.db.pool.query(
        `SELECT idx, status, delivered_at, read_at, error_message FROM rm_bulk.messages WHERE bulk_id = $1 ORDER BY idx`,
        [created.bulkId],
      );
      const at = new Date((START / 1000 + 60) * 1000);
      expect(rows.rows).toEqual([
        { idx: 0, status: 'read', delivered_at: at, read_at: at, error_message: null },
        { idx: 1, status: 'read', delivered_at: at, read_at: at, error_message: null },
        { idx: 2, status: 'failed', delivered_at: at, read_at: null, error_message: 'Re-engagement message' },
        { idx: 3, status: 'sent', delivered_at: null, read_at: null, error_message: null },
      ]);
    } finally {
      await consumer.stop();
    }
  });

  it('applies a batch of bulk statuses with one append: exact rows, nothing twice, a redelivered batch changes nothing', async () => {
    const bulk = await dispatchedBulk(6, '+54911691');
    const ts = String(Math.floor(START / 1000) + 120);
    const sequence: Array<[number, 'delivered' | 'read' | 'failed']> = [
      [0, 'delivered'], [0, 'delivered'], [0, 'read'], // duplicate, then read
      [1, 'read'], [1, 'delivered'], // read first implies delivered; the late delivered is nothing
      [2, 'delivered'], [2, 'failed'],
      [3, 'read'], [3, 'read'],
      [4, 'failed'],
    ];
    const records = statusRecords(bulk, sequence, ts);
    const handle = createDeliveryBatchHandler(t.services, { ownerGraceMs: 2000, ownerWaitMs: 50 });
    const appendMany = jest.spyOn(t.services.store, 'appendMany');
    const append = jest.spyOn(t.services.store, 'append');
    try {
      expect((await handle(records)).map((o) => o.kind)).toEqual(records.map(() => 'ok'));
      expect([appendMany.mock.calls.length, append.mock.calls.length]).toEqual([1, 0]);
      await t.services.runner.waitFor(await t.services.store.headPosition());
      const recorded = await eventsOfType('BulkRecipientStatusRecorded', bulk.bulkId);
      expect(recorded.map((e) => [e.index, e.status, e.implied])).toEqual([
        [0, 'delivered', false], [0, 'read', false], [1, 'delivered', true], [1, 'read', false], [2, 'delivered', false], [2, 'failed', false],
        [3, 'delivered', true], [3, 'read', false], [4, 'failed', false],
      ]);
      const at = new Date((START / 1000 + 120) * 1000);
      const rows = await t.db.pool.query(`SELECT idx, status, delivered_at, read_at, error_code FROM rm_bulk.messages WHERE bulk_id = $1 ORDER BY idx`, [bulk.bulkId]);
      expect(rows.rows).toEqual([
        { idx: 0, status: 'read', delivered_at: at, read_at: at, error_code: null },
        { idx: 1, status: 'read', delivered_at: at, read_at: at, error_code: null },
        { idx: 2, status: 'failed', delivered_at: at, read_at: null, error_code: '131047' },
        { idx: 3, status: 'read', delivered_at: at, read_at: at, error_code: null },
        { idx: 4, status: 'failed', delivered_at: null, read_at: null, error_code: '131047' },
        { idx: 5, status: 'sent', delivered_at: null, read_at: null, error_code: null },
      ]);
      expect(await storedCounters(t.db.pool, bulk.bulkId)).toEqual(await countersFromRows(t.db.pool, bulk.bulkId));
      expect(await storedCounters(t.db.pool, bulk.bulkId)).toMatchObject({ sent_count: 6, delivered_count: 4, read_count: 3, failed_count: 2 });

      expect((await handle(records)).map((o) => o.kind)).toEqual(records.map(() => 'ok')); // redelivered
      await t.services.runner.waitFor(await t.services.store.headPosition());
      expect(await eventsOfType('BulkRecipientStatusRecorded', bulk.bulkId)).toHaveLength(9);
    } finally {
      appendMany.mockRestore();
      append.mockRestore();
    }
  });

  it('the per-record path (a lane the batch cannot take) applies bulk statuses by the same rules', async () => {
    const bulk = await dispatchedBulk(2, '+54911692');
    const ts = String(Math.floor(START / 1000) + 180);
    const handle = createDeliveryHandler(t.services, { ownerGraceMs: 2000, ownerWaitMs: 50 });
    const sequence: Array<[number, 'delivered' | 'read']> = [[0, 'delivered'], [0, 'read'], [0, 'delivered'], [1, 'read']];
    for (const record of statusRecords(bulk, sequence, ts)) {
      await handle(record);
      await t.services.runner.waitFor(await t.services.store.headPosition());
    }
    expect((await eventsOfType('BulkRecipientStatusRecorded', bulk.bulkId)).map((e) => [e.index, e.status, e.implied])).toEqual([
      [0, 'delivered', false], [0, 'read', false], [1, 'delivered', true], [1, 'read', false],
    ]);
    expect(await storedCounters(t.db.pool, bulk.bulkId)).toMatchObject({ sent_count: 2, delivered_count: 2, read_count: 2, failed_count: 0 });
  });

  it('the bulk read model: applyBatch (statuses in set-based runs) leaves the rows of apply, at every batch size and redelivered', async () => {
    await t.services.runner.waitFor(await t.services.store.headPosition());
    const log = (await t.services.store.readAll(START_POSITION, 100_000)).events;
    expect(log.filter((e) => e.type === 'BulkRecipientStatusRecorded').length).toBeGreaterThan(10);
    await fillProjection(t.db.pool, { ...bulkProjection, applyBatch: undefined }, 'rm_bulk__one', chunksOf(log, 1));
    const expected = await checksumProjection(t.db.pool, bulkProjection, 'rm_bulk__one');
    expect(await checksumProjection(t.db.pool, bulkProjection)).toBe(expected); // the live model, filled by the runner
    for (const size of [log.length, 2, 3, 7]) {
      const batches = chunksOf(log, size);
      batches.splice(Math.floor(batches.length / 2), 0, batches[Math.floor(batches.length / 3)]); // one batch again, later
      await fillProjection(t.db.pool, bulkProjection, 'rm_bulk__batch', batches);
      expect(await checksumProjection(t.db.pool, bulkProjection, 'rm_bulk__batch')).toBe(expected);
    }
  });
});
