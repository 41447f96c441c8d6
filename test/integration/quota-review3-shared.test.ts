import pino from 'pino';
import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { SendRefusedError } from '../../src/commands/send/handler';
import { QuotaHolds, quotaLockKey, SendQuotaGate } from '../../src/commands/send/quota-gate';
import { sendTemplate } from '../../src/commands/send/send-template';
import { ProviderError, type SendTemplateRequest } from '../../src/ports/provider';
import { uniqueRecipientsSent24h } from '../../src/projections/accounts/queries';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, FakeClock, phones, RecordingProvider, sandbox, sweepBulkLeasesNow, waitForBulk } from '../support/bulk';
import { createTestContext, type TestContext } from '../support/services';

// Single and bulk sends of one number near its daily quota share one accounting (docs/sends.md, "Quota gate";
// docs/bulk.md, "Quota"): a single send counts the bulk's recipients in flight, a bulk claim counts the single sends
// in flight, so together they send to no more new recipients than remain. Calls are held at the provider (no timing):
// what is in flight is certain when the other path checks.

const START = Date.parse('2026-03-01T10:00:00.000Z');
const LIMIT = 50; // TIER_50

/** more TIER_50 numbers of BULK_CO, one per test below the first two */
const MORE = [61, 62, 63, 64].map((id) => ({ id, phoneNumberId: `3000000000000${id}` }));

function fixture() {
  const f = bulkFixture();
  const numbers = f.companies[0].phoneNumbers;
  const pacing = numbers.find((n: { id: number }) => n.id === BULK_CO.pacing.id);
  for (const n of MORE) numbers.push({ ...pacing, id: n.id, phoneNumberId: n.phoneNumberId, templates: [{ ...pacing.templates[0], id: 6100 + n.id }] });
  return f;
}

/** A held provider call: `reached` once the call is at the provider, `release()` lets it answer. */
function heldCall() {
  let reached!: () => void;
  let release!: () => void;
  const at = new Promise<void>((r) => (reached = r));
  const gate = new Promise<void>((r) => (release = r));
  return { reached: at, release, hold: () => (reached(), gate) };
}

// Each test sends ~50 single sends first, each waiting for the read models (read-your-writes), and the log is read
// only below the cluster's oldest running transaction (test databases share one cluster; other suites hold
// transactions open): on a loaded machine a send may wait ~1 s, past jest's 60 s. A test timed out by jest goes on in
// the background and moves the shared clock under the next one (seen in a loaded run: two tests failed so).
jest.setTimeout(240_000);

describe('single and bulk sends of one number near its quota', () => {
  let t: TestContext;
  const clock = new FakeClock(START);
  let provider: RecordingProvider;
  let dispatcher: BulkDispatcher | undefined;

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), clock.now);
    t = await createTestContext({ now: clock.now, provider });
    await seedFixture(t.services, fixture(), { actor: 'test' });
  });
  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
    provider.hold = undefined;
  });
  afterAll(async () => {
    await t?.close();
  });

  const single = (phoneNumberId: string, recipientPhone: string) =>
    sendTemplate(t.services, {
      companyId: BULK_CO.companyId, actor: 'test', phoneNumberId, templateName: 'welcome', language: 'es', recipientPhone, variables: {}, buttonVariables: {},
    });
  /** 'sent', or the refusal's code */
  const outcomeOf = (p: Promise<unknown>) => p.then(() => 'sent', (err) => (err instanceof SendRefusedError ? err.code : String(err)));
  const startDispatcher = () => {
    dispatcher = new BulkDispatcher(t.services, { now: clock.now, sleep: clock.sleep, pollMs: 20, provider });
    dispatcher.start();
  };
  const bulk = (phoneNumberId: string, list: string[]) =>
    createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId, templateName: 'welcome', language: 'es',
      recipients: list.map((phone) => ({ phone })),
    });

  it('a bulk recipient in flight counts for single sends: of 2 new recipients left, the bulk takes 1 and only 1 single send goes', async () => {
    const n = BULK_CO.quota;
    const accepted = new Set<string>();
    provider.hold = (request: SendTemplateRequest) => (accepted.add(request.to), undefined);
    for (const phone of phones(LIMIT - 2, '+54911710')) await single(n.phoneNumberId, phone);
    const call = heldCall();
    const bulkList = phones(3, '+54911720');
    provider.hold = (request) => {
      accepted.add(request.to);
      return bulkList.includes(request.to) ? call.hold() : undefined;
    };
    const created = await bulk(n.phoneNumberId, bulkList);
    startDispatcher();
    await call.reached; // the bulk's first recipient is at the provider

    const singles = await Promise.all(phones(2, '+54911730').map((p) => outcomeOf(single(n.phoneNumberId, p))));
    call.release();
    const b = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (x) => x.paused);

    expect(accepted.size).toBe(LIMIT);
    expect(singles.sort()).toEqual(['QUOTA_EXCEEDED', 'sent']);
    expect(b).toMatchObject({ sentCount: 1, pendingCount: 2 });
    await t.services.runner.waitFor(await t.services.store.headPosition());
    expect(await uniqueRecipientsSent24h(t.db.pool, n.id, clock.now())).toBe(LIMIT);
  });

  it('a single send in flight counts for the bulk: with 1 new recipient left and that send at the provider, the bulk pauses without sending', async () => {
    const n = BULK_CO.pacing;
    const accepted = new Set<string>();
    provider.hold = (request: SendTemplateRequest) => (accepted.add(request.to), undefined);
    for (const phone of phones(LIMIT - 1, '+54911740')) await single(n.phoneNumberId, phone);
    const call = heldCall();
    const last = '+5491175000001';
    provider.hold = (request) => {
      accepted.add(request.to);
      return request.to === last ? call.hold() : undefined;
    };
    const inFlight = outcomeOf(single(n.phoneNumberId, last));
    await call.reached;

    const created = await bulk(n.phoneNumberId, phones(2, '+54911760'));
    startDispatcher();
    const b = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (x) => x.paused);
    call.release();

    expect(await inFlight).toBe('sent');
    expect(accepted.size).toBe(LIMIT);
    expect(b).toMatchObject({ sentCount: 0, pendingCount: 2 });
    await t.services.runner.waitFor(await t.services.store.headPosition());
    expect(await uniqueRecipientsSent24h(t.db.pool, n.id, clock.now())).toBe(LIMIT);
  });
  it('a bulk blocked by a single send in flight looks again when its reservation expires: refused, its room goes to the bulk', async () => {
    const n = MORE[0];
    const accepted = new Set<string>();
    provider.hold = (request: SendTemplateRequest) => (accepted.add(request.to), undefined);
    for (const phone of phones(LIMIT - 1, '+54911770')) await single(n.phoneNumberId, phone);
    const call = heldCall();
    const last = '+5491178000001';
    const send = provider.sendTemplate;
    provider.sendTemplate = async (request) => {
      if (request.to !== last) return send.call(provider, request);
      await call.hold();
      throw new ProviderError('131026', 'Message undeliverable', false);
    };
    try {
      const inFlight = outcomeOf(single(n.phoneNumberId, last));
      await call.reached;
      const created = await bulk(n.phoneNumberId, phones(1, '+54911790'));
      startDispatcher();
      await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (x) => x.paused);
      call.release();
      expect(await inFlight).toBe('PROVIDER_REFUSED');

      const pauses = await t.db.pool.query(`SELECT data->>'resumeAt' AS at FROM es.events WHERE type = 'BulkSendPaused' AND data->>'bulkId' = $1`, [created.bulkId]);
      // the single send's reservation: the provider's longest call (10 s, none declared) plus 20 s; not the window's oldest + 24 h
      expect(pauses.rows.map((r) => r.at)).toEqual([new Date(clock.now().getTime() + 30_001).toISOString()]);
      clock.advance(30_001);
      dispatcher!.kick();
      const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (x) => x.status === 'COMPLETED');
      expect(done).toMatchObject({ sentCount: 1, pendingCount: 0 });
      expect(accepted.size).toBe(LIMIT);
    } finally {
      provider.sendTemplate = send;
    }
  });

  it('a bulk recipient the provider refuses gives its room back: the bulk sends to as many new recipients as remain', async () => {
    const n = MORE[1];
    for (const phone of phones(LIMIT - 2, '+54911810')) await single(n.phoneNumberId, phone);
    const accepted = new Set<string>();
    provider.hold = (request: SendTemplateRequest) => (accepted.add(request.to), undefined);
    // the sandbox refuses a number ending in 0000
    const created = await bulk(n.phoneNumberId, ['+5491182000000', ...phones(2, '+54911830')]);
    startDispatcher();
    const done = await waitForBulk(t.db.pool, BULK_CO.companyId, created.bulkId, (x) => x.paused || ['COMPLETED', 'PARTIAL', 'FAILED'].includes(x.status));
    expect(done).toMatchObject({ status: 'PARTIAL', paused: false, sentCount: 2, failedCount: 1, pendingCount: 0 });
    expect(accepted.size).toBe(2);
    await t.services.runner.waitFor(await t.services.store.headPosition());
    expect(await uniqueRecipientsSent24h(t.db.pool, n.id, clock.now())).toBe(LIMIT);
  });

  it('expired reservations of a number that reserves no more are deleted by the lease sweep', async () => {
    const n = MORE[2];
    // a reservation left by a process that died near the limit (nothing gives it back)
    const dead = new SendQuotaGate(t.db.pool, pino({ level: 'silent' }), 30_000);
    expect(await dead.admit(new QuotaHolds(dead), { numberId: n.id, tier: 'TIER_50', recipient: '+5491184000001', now: clock.now() })).toBeUndefined();
    const left = async () => (await t.db.pool.query('SELECT count(*)::int AS n FROM public.send_quota_reservations WHERE number_id = $1', [n.id])).rows[0].n;
    expect(await sweepBulkLeasesNow(t.services)).toMatchObject({ expiredReservations: 0 });
    expect(await left()).toBe(1);
    clock.advance(30_000);
    expect(await sweepBulkLeasesNow(t.services)).toMatchObject({ expiredReservations: 1 });
    expect(await left()).toBe(0);
  });
  it('a single send near the limit and a bulk claim wait for the same lock of the number: one check at a time, together within the quota', async () => {
    const n = MORE[3];
    for (const phone of phones(LIMIT - 1, '+54911850')) await single(n.phoneNumberId, phone);
    const accepted = new Set<string>();
    provider.hold = (request: SendTemplateRequest) => (accepted.add(request.to), undefined);
    const holder = await t.db.pool.connect();
    const waiting = async () => (await t.db.pool.query(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND objid::bigint = (hashtext($1)::bigint & 4294967295)`,
      [quotaLockKey(n.id)],
    )).rows[0].n;
    let singleSend: Promise<string>;
    let created: Awaited<ReturnType<typeof bulk>>;
    try {
      await holder.query('SELECT pg_advisory_lock(hashtext($1))', [quotaLockKey(n.id)]);
      singleSend = outcomeOf(single(n.phoneNumberId, '+5491186000001'));
      created = await bulk(n.phoneNumberId, phones(1, '+54911870'));
      startDispatcher();
      const deadline = Date.now() + 30_000;
      while ((await waiting()) < 2) {
        if (Date.now() > deadline) throw new Error(`not both waiting for the lock: ${await waiting()}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
      holder.release();
    }
    const b = await waitForBulk(t.db.pool, BULK_CO.companyId, created!.bulkId, (x) => x.paused || x.status === 'COMPLETED');
    const outcome = await singleSend!;
    expect(accepted.size).toBe(1);
    expect([outcome, b.sentCount]).toEqual(outcome === 'sent' ? ['sent', 0] : ['QUOTA_EXCEEDED', 1]);
  });
});
