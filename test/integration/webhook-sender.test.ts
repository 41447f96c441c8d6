import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Resolver } from '../../src/adapters/webhooks/address-guard';
import { WebhookHttpClient } from '../../src/adapters/webhooks/http-client';
import { disableFailingEndpoint, webhookEndpointDepsOf } from '../../src/commands/webhook-endpoint/handler';
import { CLAIM_DUE_DELIVERIES_SQL, CLAIM_DUE_PLAN_SETTING, claimDueDeliveries, setDeliveriesAside } from '../../src/projections/webhooks/deliveries';
import { answerError } from '../../src/workers/webhook-attempt-recorder';
import { FAILING_DISABLE_AFTER_MS } from '../../src/workers/webhook-schedule';
import { ENDPOINT_CONCURRENCY, startWebhookSender, WEBHOOK_MAX_RESPONSE_BYTES, WEBHOOK_TIMEOUT_MS } from '../../src/workers/webhook-sender';
import { startConnectProxy } from '../support/connect-proxy';
import { metricSample } from '../support/metrics';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// The sender's delivery rules on real Postgres and a real receiver (docs/webhooks.md, "Delivery"): several senders
// share the queue without sending an event twice, an endpoint failing every attempt for 5 days is disabled,
// the timeout, the capped response body and the address guard at connection time.

const BASE = '/api/v1/webhook-endpoints/';

describe('webhook sender', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, receiver, register, queue } = bed));

  // the blocks one claim reads, as the sender runs it (rolled back)
  const blocksOfAClaim = async () => {
    const c = await t.db.pool.connect();
    try {
      await c.query('BEGIN');
      await c.query(CLAIM_DUE_PLAN_SETTING);
      const now = new Date();
      const r = await c.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${CLAIM_DUE_DELIVERIES_SQL}`, [now, 200, new Date(now.getTime() + 60_000), []]);
      const plan = r.rows[0]['QUERY PLAN'][0].Plan as { 'Shared Hit Blocks': number; 'Shared Read Blocks': number };
      return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
    } finally {
      await c.query('ROLLBACK');
      c.release();
    }
  };

  /**
   * The blocks a claim reads once the claims before it have marked the dead index entries they passed. An entry can be
   * marked only when no snapshot in this database may still see its row: an autovacuum analyze or a projection batch
   * running at that moment keeps it alive, so the measure is taken again until it settles (for up to 10 s).
   */
  const settledBlocksOfAClaim = async () => {
    const deadline = Date.now() + 10_000;
    let blocks = await blocksOfAClaim();
    while (blocks >= 20 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      blocks = await blocksOfAClaim();
    }
    return blocks;
  };

  it('two senders on one database share the queue at the same time, and send no event twice', async () => {
    const ep = await register('/shared');
    const COUNT = 400;
    const BATCH = 50;
    await queue(ep.id, COUNT, 'shared');
    // answers are held until more requests are in flight than one sender (one round at a time) can hold: both must be sending
    let inFlight = 0;
    let peak = 0;
    let open!: () => void;
    const opened = new Promise<void>((ok) => (open = ok));
    receiver.respond(async (r) => {
      if (r.path !== '/shared') return 204;
      peak = Math.max(peak, ++inFlight);
      if (inFlight > BATCH) open();
      await opened;
      inFlight--;
      return 204;
    });
    const senders = [startWebhookSender(t.services, { batchSize: BATCH, pollMs: 20, concurrency: 1 }), startWebhookSender(t.services, { batchSize: BATCH, pollMs: 20, concurrency: 1 })];
    try {
      await waitUntil(async () => receiver.received.filter((r) => r.path === '/shared').length >= COUNT, 30_000, 'every delivery');
      await new Promise((r) => setTimeout(r, 200)); // nothing more arrives
    } finally {
      for (const s of senders) await s.stop();
    }
    const ids = receiver.received.filter((r) => r.path === '/shared').map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(COUNT);
    expect(new Set(ids).size).toBe(COUNT);
    expect(peak).toBeGreaterThan(BATCH);
    const rows = await t.db.pool.query(`SELECT status, attempts, count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 GROUP BY 1, 2`, [ep.id]);
    expect(rows.rows).toEqual([{ status: 'succeeded', attempts: 1, n: COUNT }]);
  });

  const gauges = async () => {
    const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    return { inFlight: metricSample(text, 'switchboard_webhook_requests_in_flight'), full: metricSample(text, 'switchboard_webhook_endpoints_full') };
  };

  it("a stuck endpoint with a backlog holds only its own lane: another endpoint on the same host is served meanwhile; every delivery arrives once", async () => {
    const stuck = await register('/stuck');
    const fine = await register('/fine');
    let unblock!: () => void;
    const blocked = new Promise<void>((ok) => (unblock = ok));
    let stuckInFlight = 0;
    let stuckPeak = 0;
    receiver.respond(async (r) => {
      if (r.path !== '/stuck') return 204;
      stuckPeak = Math.max(stuckPeak, ++stuckInFlight);
      await blocked; // answers nothing until the other endpoint's deliveries are recorded
      stuckInFlight--;
      return 204;
    });
    const BACKLOG = 1_000;
    const FRESH = 50;
    await queue(stuck.id, BACKLOG, 'stuck', new Date(Date.now() - 60_000)); // due first: ahead of the others in every claim
    await queue(fine.id, FRESH, 'fine');
    const statusOf = async (endpointId: string) => Object.fromEntries((await t.db.pool.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 GROUP BY 1', [endpointId])).rows.map((r) => [r.status, r.n]));
    const sender = startWebhookSender(t.services, { pollMs: 10 });
    try {
      await waitUntil(async () => (await statusOf(fine.id)).succeeded === FRESH, 20_000, "the other endpoint's deliveries, recorded while the stuck one answers nothing");
      await waitUntil(async () => stuckInFlight === ENDPOINT_CONCURRENCY, 20_000, 'the stuck endpoint at its concurrency');
      expect(await statusOf(stuck.id)).toEqual({ pending: BACKLOG }); // none answered, none recorded
      expect(await gauges()).toEqual({ inFlight: ENDPOINT_CONCURRENCY, full: 1 });
      expect(receiver.received.filter((r) => r.path === '/fine')).toHaveLength(FRESH);
      unblock();
      await waitUntil(async () => (await statusOf(stuck.id)).succeeded === BACKLOG, 30_000, 'the backlog, once the endpoint answers');
    } finally {
      unblock();
      await sender.stop();
    }
    expect(stuckPeak).toBe(ENDPOINT_CONCURRENCY);
    expect(await gauges()).toEqual({ inFlight: 0, full: 0 });
    const ids = receiver.received.filter((r) => r.path === '/stuck').map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(BACKLOG);
    expect(new Set(ids).size).toBe(BACKLOG);
  });

  it('endpoints that stop answering are narrowed to one request each by their timeouts: another endpoint is served while most of their backlogs wait untried', async () => {
    const STUCK = 20;
    const BACKLOG = 500; // each: 20 x 128 requests in flight would be more than the sender holds for full endpoints
    const FRESH = 50;
    const stuck = [];
    // each registration is answered once the read models have it (read-your-writes), and the log is read only below
    // the cluster's oldest running transaction (test databases share one cluster; other suites hold transactions
    // open): 21 of them may take ~30 s before the 60-s wait below, so the test gets 180 s
    for (let i = 0; i < STUCK; i++) stuck.push(await register(`/dead-${i}`));
    const fine = await register('/alive');
    let unblock!: () => void;
    const blocked = new Promise<void>((ok) => (unblock = ok));
    let tried = 0;
    receiver.respond(async (r) => {
      if (!r.path.startsWith('/dead-')) return 204;
      tried++;
      await blocked; // no answer: the sender's timeout ends each request
      return 204;
    });
    const dueFirst = new Date(Date.now() - 60_000);
    for (const [i, ep] of stuck.entries()) await queue(ep.id, BACKLOG, `dead${i}-`, dueFirst);
    await queue(fine.id, FRESH, 'alive');
    const sender = startWebhookSender(t.services, { pollMs: 10, timeoutMs: 1_000 });
    let triedWhenServed: number;
    try {
      await waitUntil(async () => receiver.received.filter((r) => r.path === '/alive').length === FRESH, 60_000, "the answering endpoint's deliveries");
      triedWhenServed = tried;
    } finally {
      unblock();
      await sender.stop();
      // their backlogs are dropped, and their entries in the due index vacuumed: the tests after this one measure claims
      for (const ep of stuck) await t.app.inject({ method: 'DELETE', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key } });
      await t.db.pool.query('VACUUM webhooks.deliveries');
    }
    // the old sender tried every backlog first (each endpoint refilled to 128 requests as its timeouts freed room)
    expect(triedWhenServed).toBeLessThan((STUCK * BACKLOG) / 2);
    expect(triedWhenServed).toBeGreaterThan(0);
  }, 180_000);

  it("a claim with caps gives each capped endpoint its earliest due deliveries up to its cap, the others what is due, and leaves the surplus due", async () => {
    const capped = await register('/capped');
    const other = await register('/uncapped');
    // in due order: 10 of the capped endpoint, 5 of the other, 10 more of the capped one
    await queue(capped.id, 10, 'capped-early-', new Date(Date.now() - 60_000));
    await queue(other.id, 5, 'uncapped-', new Date(Date.now() - 30_000));
    await queue(capped.id, 10, 'capped-late-');
    const claim = (caps: { endpointIds: string[]; rooms: number[] }) =>
      claimDueDeliveries(t.db.pool, new Date(), 20, new Date(Date.now() + 60_000), [], caps);
    try {
      const first = await claim({ endpointIds: [capped.id], rooms: [3] });
      // three of the ten due first (they share one due time: which three is the database's choice)
      const ofCapped = first.filter((d) => d.endpoint_id === capped.id).map((d) => d.webhook_id);
      expect(ofCapped).toHaveLength(3);
      expect(ofCapped.every((id) => id.startsWith('msg_capped-early-'))).toBe(true);
      expect(first.filter((d) => d.endpoint_id === other.id)).toHaveLength(5);
      const rest = (await claim({ endpointIds: [], rooms: [] })).filter((d) => [capped.id, other.id].includes(d.endpoint_id));
      expect(rest.map((d) => d.endpoint_id)).toEqual(Array(17).fill(capped.id));
    } finally {
      for (const ep of [capped, other]) await t.app.inject({ method: 'DELETE', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key } });
    }
  });

  it("stopping, a sender lets its requests in flight finish and releases its endpoints' waiting deliveries: due at once, not at their lease's end", async () => {
    const ep = await register('/lane');
    let answer!: () => void;
    const held = new Promise<void>((ok) => (answer = ok));
    let arrived = 0;
    receiver.respond(async (r) => {
      if (r.path !== '/lane') return 204;
      arrived++;
      await held;
      return 204;
    });
    await queue(ep.id, 3, 'lane');
    const sender = startWebhookSender(t.services, { pollMs: 10, endpointConcurrency: 1 }); // one request at a time: two wait
    await waitUntil(async () => arrived === 1, 10_000, 'the first delivery in flight');
    const stopped = sender.stop();
    answer();
    await stopped;
    const rows = (await t.db.pool.query<{ status: string; attempts: number; next_attempt_at: Date | null }>(
      'SELECT status, attempts, next_attempt_at FROM webhooks.deliveries WHERE endpoint_id = $1 ORDER BY status DESC, webhook_id', [ep.id])).rows;
    expect(rows.map((r) => [r.status, r.attempts])).toEqual([['succeeded', 1], ['pending', 0], ['pending', 0]]);
    for (const r of rows.slice(1)) expect(r.next_attempt_at!.getTime()).toBeLessThanOrEqual(Date.now());
    expect(arrived).toBe(1);
  });

  it('an endpoint failing every attempt for 5 days is disabled (reason failing); one success resets the streak', async () => {
    const ep = await register('/failing');
    let up = false;
    receiver.respond((r) => (r.path === '/failing' && !up ? 500 : 204));
    let clock = Date.parse('2026-03-01T10:00:00.000Z');
    const services = { ...t.services, now: () => new Date(clock) };
    const sender = startWebhookSender(services, { pollMs: 10, schedule: [60_000] });
    const attempts = async () => (await t.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhooks.attempts WHERE endpoint_id = $1', [ep.id])).rows[0].n;
    const enabled = async () => (await t.app.inject({ method: 'GET', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key } })).json();
    try {
      await queue(ep.id, 1, 'fail-a', new Date(clock));
      await waitUntil(async () => (await attempts()) === 1, 10_000, 'the first failed attempt');
      // 4 days on: a success clears the streak
      clock += 4 * 24 * 3600_000;
      up = true;
      await queue(ep.id, 1, 'fail-b', new Date(clock));
      await waitUntil(async () => (await attempts()) >= 3, 10_000, 'the retry and the success');
      up = false;
      // failing again, for just under and then just over 5 days
      await queue(ep.id, 1, 'fail-c', new Date(clock));
      await waitUntil(async () => (await attempts()) === 4, 10_000, 'a new failure');
      clock += FAILING_DISABLE_AFTER_MS - 60_000;
      await queue(ep.id, 1, 'fail-d', new Date(clock));
      await waitUntil(async () => (await attempts()) === 6, 10_000, 'failures just under 5 days'); // fail-c's retry and fail-d
      expect(await enabled()).toMatchObject({ enabled: true });
      clock += 2 * 60_000;
      await queue(ep.id, 1, 'fail-e', new Date(clock));
      const shown = await waitUntil(async () => {
        const e = await enabled();
        return e.enabled === false && e;
      }, 10_000, 'the endpoint disabled');
      expect(shown).toMatchObject({ enabled: false, disabled_reason: 'failing' });
      // its queued retries are set aside while it is disabled: no due time, so no claim scans them
      const queued = async () => (await t.db.pool.query<{ pending: number; due: number }>(
        `SELECT count(*)::int AS pending, count(next_attempt_at)::int AS due FROM webhooks.deliveries WHERE endpoint_id = $1 AND status = 'pending'`, [ep.id])).rows[0];
      const setAside = await waitUntil(async () => {
        const q = await queued();
        return q.due === 0 && q;
      }, 10_000, 'the retries set aside');
      expect(setAside.pending).toBeGreaterThan(0);
    } finally {
      await sender.stop();
    }
  });

  it('an endpoint disabled for failing and enabled again starts a new failure streak: one failed answer does not disable it again', async () => {
    const ep = await register('/re-enabled');
    const deps = webhookEndpointDepsOf(t.services);
    await queue(ep.id, 2, 're-enabled');
    // failing for 6 days, then disabled by the recorder's rule, its deliveries set aside
    await t.db.pool.query(
      `INSERT INTO webhooks.endpoint_health (endpoint_id, failing_since) VALUES ($1, now() - interval '6 days')
       ON CONFLICT (endpoint_id) DO UPDATE SET failing_since = EXCLUDED.failing_since`, [ep.id]);
    expect(await disableFailingEndpoint(deps, SHOP.companyId, ep.id, 'failing')).toBe(true);
    await setDeliveriesAside(t.db.pool, ep.id);
    const shown = async () => (await t.app.inject({ method: 'GET', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key } })).json();
    expect(await shown()).toMatchObject({ enabled: false, disabled_reason: 'failing' });

    const patched = await t.app.inject({ method: 'PATCH', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key }, payload: { enabled: true } });
    expect(patched.statusCode).toBe(200);
    let failures = 1; // one 503, then 204s
    receiver.respond((r) => (r.path === '/re-enabled' && failures-- > 0 ? 503 : 204));
    const sender = startWebhookSender(t.services, { pollMs: 10, schedule: [50], endpointConcurrency: 1 }); // one answer at a time
    try {
      await waitUntil(async () => receiver.received.filter((r) => r.path === '/re-enabled').length === 2, 10_000, 'both deliveries, one of them retried');
    } finally {
      await sender.stop();
    }
    expect(receiver.received.filter((r) => r.path === '/re-enabled').map((r) => r.headers['webhook-id']).sort()).toEqual(['msg_re-enabled0', 'msg_re-enabled1']);
    expect(await shown()).toMatchObject({ enabled: true, disabled_reason: null });
    const attempts = await t.db.pool.query<{ status_code: number }>('SELECT status_code FROM webhooks.attempts WHERE endpoint_id = $1 ORDER BY attempt_id', [ep.id]);
    expect(attempts.rows.map((a) => a.status_code)).toEqual([503, 204, 204]);
  });

  it('a new URL starts a new failure streak; a PATCH that neither enables the endpoint nor changes its URL keeps it', async () => {
    const ep = await register('/streak-url');
    const since = new Date(Date.now() - 4 * 24 * 3600_000);
    await t.db.pool.query('INSERT INTO webhooks.endpoint_health (endpoint_id, failing_since) VALUES ($1, $2)', [ep.id, since]);
    const patch = async (payload: object) =>
      expect((await t.app.inject({ method: 'PATCH', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key }, payload })).statusCode).toBe(200);
    const failingSince = async () => (await t.db.pool.query<{ failing_since: Date | null }>(
      'SELECT failing_since FROM webhooks.endpoint_health WHERE endpoint_id = $1', [ep.id])).rows[0].failing_since;
    await patch({ description: 'still the same server', enabled: true, url: receiver.url('/streak-url') }); // enabled already, same URL
    expect(await failingSince()).toEqual(since);
    await patch({ url: receiver.url('/streak-url-new') });
    expect(await failingSince()).toBeNull();
  });

  it('a delivery whose answer could come after its lease ends (within a timeout) is not posted on that lease: released, claimed again, posted once', async () => {
    const ep = await register('/lease-edge');
    const LEASE = 60_000;
    const TIMEOUT = 10_000;
    let clock = Date.parse('2026-03-01T10:00:00.000Z');
    const services = { ...t.services, now: () => new Date(clock) };
    await queue(ep.id, 2, 'lease-edge', new Date(clock));
    let answer!: () => void;
    const held = new Promise<void>((ok) => (answer = ok));
    const leaseAtPost = new Map<string, number>();
    receiver.respond(async (r) => {
      if (r.path !== '/lease-edge') return 204;
      const id = r.headers['webhook-id'] as string;
      const row = await t.db.pool.query<{ next_attempt_at: Date }>('SELECT next_attempt_at FROM webhooks.deliveries WHERE endpoint_id = $1 AND webhook_id = $2', [ep.id, id]);
      leaseAtPost.set(id, row.rows[0].next_attempt_at.getTime());
      if (leaseAtPost.size === 1) await held;
      return 204;
    });
    const sender = startWebhookSender(services, { pollMs: 10, endpointConcurrency: 1, timeoutMs: TIMEOUT }); // one request at a time: one waits
    try {
      await waitUntil(async () => leaseAtPost.size === 1, 10_000, 'the first delivery in flight');
      const firstLease = clock + LEASE;
      expect([...leaseAtPost.values()]).toEqual([firstLease]);
      clock = firstLease - TIMEOUT / 2; // the lease has not ended, but would before the next request could time out
      answer();
      await waitUntil(async () => leaseAtPost.size === 2, 10_000, 'the second delivery');
      await new Promise((r) => setTimeout(r, 200)); // nothing more arrives
      const [, second] = [...leaseAtPost.values()];
      expect(second).toBe(clock + LEASE); // posted on a new claim, not on the lease that was about to end
    } finally {
      await sender.stop();
    }
    expect(receiver.received.filter((r) => r.path === '/lease-edge').map((r) => r.headers['webhook-id']).sort()).toEqual(['msg_lease-edge0', 'msg_lease-edge1']);
  });

  it("stopping, a sender releases a waiting delivery only while its lease is still the sender's: another sender's claim of it is left alone", async () => {
    const ep = await register('/lease-taken');
    const LEASE = 60_000;
    let clock = Date.parse('2026-03-01T10:00:00.000Z');
    const services = { ...t.services, now: () => new Date(clock) };
    await queue(ep.id, 2, 'lease-taken', new Date(clock));
    let answer!: () => void;
    const held = new Promise<void>((ok) => (answer = ok));
    let arrived = 0;
    receiver.respond(async (r) => {
      if (r.path !== '/lease-taken') return 204;
      arrived++;
      await held;
      return 204;
    });
    // one request at a time: one delivery waits in the lane; no claim of its own after the first
    const sender = startWebhookSender(services, { pollMs: 120_000, endpointConcurrency: 1 });
    await waitUntil(async () => arrived === 1, 10_000, 'the first delivery in flight');
    // the lease ends while the request is held; another sender claims what is due
    clock += LEASE + 1;
    const otherLease = new Date(clock + LEASE);
    const taken = await claimDueDeliveries(t.db.pool, new Date(clock), 1000, otherLease);
    expect(taken.filter((d) => d.endpoint_id === ep.id)).toHaveLength(2);
    const stopped = sender.stop();
    answer();
    await stopped;
    const waiting = await t.db.pool.query<{ status: string; next_attempt_at: Date | null }>(
      `SELECT status, next_attempt_at FROM webhooks.deliveries WHERE endpoint_id = $1 AND status = 'pending'`, [ep.id]);
    expect(waiting.rows).toEqual([{ status: 'pending', next_attempt_at: otherLease }]); // still the other sender's
    expect(arrived).toBe(1);
    await t.app.inject({ method: 'DELETE', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key } }); // drops its delivery (due in real time), which the claims measured below would read
  });

  it("a failed answer's Retry-After (seconds or an HTTP-date) sets the next attempt when it asks for more than the schedule, up to 1 h", async () => {
    const clock = Date.parse('2026-03-01T10:00:00.000Z');
    const services = { ...t.services, now: () => new Date(clock) };
    const retryAfter: Record<string, string | undefined> = {
      '/ra-seconds': '120', '/ra-date': new Date(clock + 10 * 60_000).toUTCString(), '/ra-short': '1', '/ra-huge': '999999',
      '/ra-past': new Date(clock - 60_000).toUTCString(), '/ra-garbage': 'soon', '/ra-none': undefined,
    };
    const endpoints = await Promise.all(Object.keys(retryAfter).map(async (path) => ({ path, ep: await register(path) })));
    receiver.respond((r) => {
      const value = retryAfter[r.path];
      return value === undefined ? 503 : { status: r.path === '/ra-date' ? 429 : 503, headers: { 'Retry-After': value } };
    });
    const sender = startWebhookSender(services, { pollMs: 10, random: () => 0.5 }); // the schedule's first wait: 5 s exactly
    const nextRetryOf = async (endpointId: string) => (await t.db.pool.query<{ next_retry_at: Date | null }>(
      'SELECT next_retry_at FROM webhooks.attempts WHERE endpoint_id = $1', [endpointId])).rows[0]?.next_retry_at;
    try {
      for (const { ep } of endpoints) await queue(ep.id, 1, `ra-${ep.id.slice(0, 8)}`, new Date(clock));
      const waits = await waitUntil(async () => {
        const next = await Promise.all(endpoints.map(async ({ path, ep }) => [path, await nextRetryOf(ep.id)] as const));
        return next.every(([, at]) => at) && Object.fromEntries(next.map(([path, at]) => [path, (at!.getTime() - clock) / 1000]));
      }, 10_000, 'one failed attempt per endpoint');
      expect(waits).toEqual({
        '/ra-seconds': 120, '/ra-date': 600, '/ra-short': 5, '/ra-huge': 3600, '/ra-past': 5, '/ra-garbage': 5, '/ra-none': 5,
      });
      // the attempt log shows what was asked, as sent, whether it was followed or not
      const errors = Object.fromEntries(await Promise.all(endpoints.map(async ({ path, ep }) => [path, (await t.db.pool.query<{ error: string }>(
        'SELECT error FROM webhooks.attempts WHERE endpoint_id = $1', [ep.id])).rows[0].error] as const)));
      expect(errors).toEqual({
        '/ra-seconds': 'HTTP 503, Retry-After: 120', '/ra-date': `HTTP 429, Retry-After: ${retryAfter['/ra-date']}`, '/ra-short': 'HTTP 503, Retry-After: 1',
        '/ra-huge': 'HTTP 503, Retry-After: 999999', '/ra-past': `HTTP 503, Retry-After: ${retryAfter['/ra-past']}`, '/ra-garbage': 'HTTP 503, Retry-After: soon', '/ra-none': 'HTTP 503',
      });
    } finally {
      await sender.stop();
      // the pauses these answers shared outlive the sender (up to 30 s): the next tests' senders would hold these retries
      await t.db.pool.query('DELETE FROM webhooks.endpoint_pauses');
    }
  });

  it("the attempt log keeps a failed answer's Retry-After cut at 64 characters", () => {
    const res = { statusCode: 429, failure: null, error: null, body: '', latencyMs: 1 };
    expect(answerError({ ...res, retryAfter: '7'.repeat(100) })).toBe(`HTTP 429, Retry-After: ${'7'.repeat(64)}`);
    expect(answerError({ ...res, retryAfter: null })).toBe('HTTP 429');
  });

  it("a failed answer's Retry-After pauses the endpoint (Standard Webhooks: throttle): its next request waits that long; another endpoint is not paused", async () => {
    const paused = await register('/throttled');
    const other = await register('/unthrottled');
    const arrivals: Array<{ path: string; at: number }> = [];
    let throttledOnce = false;
    receiver.respond((r) => {
      arrivals.push({ path: r.path, at: Date.now() });
      if (r.path === '/throttled' && !throttledOnce) {
        throttledOnce = true;
        return { status: 429, headers: { 'Retry-After': '3' } };
      }
      return 204;
    });
    const pausesCounted = async () => metricSample((await t.app.inject({ method: 'GET', url: '/metrics' })).body, 'switchboard_webhook_endpoint_pauses_total');
    const pausesBefore = await pausesCounted();
    // one request at a time per endpoint, so the endpoint's second request is the one the pause holds back
    const sender = startWebhookSender(t.services, { pollMs: 10, endpointConcurrency: 1 });
    try {
      await queue(paused.id, 3, 'throttled');
      await waitUntil(async () => throttledOnce, 10_000, 'the 429');
      await queue(other.id, 3, 'unthrottled');
      // the two others after the pause (the 429'd delivery itself is due again after the schedule's 5 s)
      await waitUntil(async () => arrivals.filter((a) => a.path === '/throttled').length >= 3, 10_000, 'the paused endpoint served again');
    } finally {
      await sender.stop();
    }
    const throttled = arrivals.filter((a) => a.path === '/throttled');
    const unthrottled = arrivals.filter((a) => a.path === '/unthrottled');
    expect(throttled.length).toBeGreaterThanOrEqual(3);
    // the second request came at least the 3 s the 429 asked for after the first; the other endpoint went meanwhile
    expect(throttled[1].at - throttled[0].at).toBeGreaterThanOrEqual(3_000 - 5);
    expect(unthrottled.length).toBe(3);
    expect(unthrottled.every((a) => a.at < throttled[1].at)).toBe(true);
    expect(await pausesCounted()).toBe(pausesBefore + 1);
    // the 429'd delivery's retry, due 4-6 s later, would be claimed by the block counts of the tests below when it
    // comes due between their sender's stop and their count (seen in review 4: 24 blocks instead of under 20)
    for (const ep of [paused, other]) await t.app.inject({ method: 'DELETE', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key } });
  });

  it('with WEBHOOKS_PROXY_URL set, the sender posts through the proxy', async () => {
    const ep = await register('/proxied');
    const proxy = await startConnectProxy();
    const proxyUrl = proxy.url;
    const services = { ...t.services, config: { ...t.services.config, webhooks: { ...t.services.config.webhooks, proxyUrl } } };
    const sender = startWebhookSender(services, { pollMs: 10 });
    try {
      await queue(ep.id, 2, 'proxied');
      await waitUntil(async () => receiver.received.filter((r) => r.path === '/proxied').length === 2, 10_000, 'two webhooks through the proxy');
    } finally {
      await sender.stop();
      await proxy.close();
    }
    expect(proxy.tunnels.length).toBeGreaterThanOrEqual(1);
    expect(new Set(proxy.tunnels)).toEqual(new Set([new URL(receiver.url()).host]));
  });

  it('a claim does not revisit delivered deliveries: their dead entries in the due index are skipped', async () => {
    const ep = await register('/many');
    receiver.respond(() => 204);
    const COUNT = 2_000;
    await queue(ep.id, COUNT, 'many');
    const sender = startWebhookSender(t.services, { batchSize: 200, pollMs: 10 });
    const succeeded = async () =>
      (await t.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 AND status = 'succeeded'`, [ep.id])).rows[0].n;
    try {
      await waitUntil(async () => (await succeeded()) === COUNT, 30_000, 'every delivery');
    } finally {
      await sender.stop();
    }
    // 2,000 deliveries leave about 4,000 dead entries: a claim visiting them reads about 60 blocks, one skipping them 4
    expect(await settledBlocksOfAClaim()).toBeLessThan(20);
  });

  it("a disabled endpoint's queued deliveries are set aside, so claims do not scan them; enabled again, every one is sent", async () => {
    const ep = await register('/paused');
    const COUNT = 2_000;
    await queue(ep.id, COUNT, 'paused');
    const patch = async (enabled: boolean) =>
      (await t.app.inject({ method: 'PATCH', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key }, payload: { enabled } })).statusCode;
    expect(await patch(false)).toBe(200);
    // 2,000 due deliveries of a disabled endpoint, left in the due index, would be read one by one on every claim
    expect(await settledBlocksOfAClaim()).toBeLessThan(20);
    expect(await patch(true)).toBe(200);
    const sender = startWebhookSender(t.services, { batchSize: 200, pollMs: 10 });
    try {
      await waitUntil(async () => receiver.received.filter((r) => r.path === '/paused').length >= COUNT, 30_000, 'every delivery after the endpoint was enabled');
    } finally {
      await sender.stop();
    }
    expect(new Set(receiver.received.filter((r) => r.path === '/paused').map((r) => r.headers['webhook-id'])).size).toBe(COUNT);
  });

  it.each([['a new URL', 'url'], ['disabled', 'disable'], ['deleted', 'delete']] as const)(
    "an endpoint given %s: what waits in its lane is given back, so nothing more is posted to it as it was", async (_what, change) => {
      const ep = await register(`/lane-${change}`);
      const oldPath = `/lane-${change}`;
      const newPath = `/lane-${change}-moved`;
      let release!: () => void;
      const held = new Promise<number>((ok) => (release = () => ok(204)));
      const posted: string[] = [];
      receiver.respond((r) => {
        if (r.path === oldPath || r.path === newPath) posted.push(r.path);
        return r.path === oldPath ? held : 204;
      });
      await queue(ep.id, 40, `lane-${change}-`);
      const sender = startWebhookSender(t.services, { pollMs: 10, endpointConcurrency: 4 });
      const count = (path: string) => posted.filter((p) => p === path).length;
      try {
        await waitUntil(async () => count(oldPath) === 4, 10_000, 'four requests in flight, the rest waiting in the lane');
        const api = (method: 'PATCH' | 'DELETE', payload?: object) =>
          t.app.inject({ method, url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key }, ...(payload ? { payload } : {}) });
        if (change === 'url') expect((await api('PATCH', { url: receiver.url(newPath) })).statusCode).toBe(200);
        if (change === 'disable') expect((await api('PATCH', { enabled: false })).statusCode).toBe(200);
        if (change === 'delete') expect((await api('DELETE')).statusCode).toBe(204);
        // the change's notification reaches the sender; then the four in flight are answered and the lane has room
        await new Promise((r) => setTimeout(r, 300));
        release();
        if (change === 'url') await waitUntil(async () => count(newPath) === 36 || undefined, 10_000, 'the 36 that waited posted to the new URL');
        else await new Promise((r) => setTimeout(r, 500)); // time enough to post what the lane held, had it kept it
        await waitUntil(async () => (await t.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM webhooks.attempts WHERE endpoint_id = $1`, [ep.id])).rows[0].n >= 4 || undefined, 10_000, 'the four answered');
      } finally {
        release();
        await sender.stop();
      }
      expect(count(oldPath)).toBe(4); // only what was in flight at the change
      expect(count(newPath)).toBe(change === 'url' ? 36 : 0);
      const statuses = (await t.db.pool.query<{ status: string; n: number }>(
        `SELECT status, count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 GROUP BY status ORDER BY status`, [ep.id])).rows;
      if (change === 'url') expect(statuses).toEqual([{ status: 'succeeded', n: 40 }]);
      if (change === 'disable') expect(statuses).toEqual([{ status: 'pending', n: 36 }, { status: 'succeeded', n: 4 }]); // set aside
      if (change === 'delete') expect(statuses).toEqual([{ status: 'dropped', n: 40 }]); // the four answered after the drop stay dropped
    });

  describe('the HTTP client', () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      server = createServer((req, res) => {
        if (req.url === '/slow') return; // never answers
        if (req.url === '/busy' || req.url === '/fine-after') {
          res.writeHead(req.url === '/busy' ? 503 : 200, { 'Retry-After': '120' });
          return void res.end();
        }
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('x'.repeat(1024 * 1024));
      });
      await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
      port = (server.address() as AddressInfo).port;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    });

    it('the sender waits 10 s for an answer and reads at most 64 KiB of it', () => {
      expect([WEBHOOK_TIMEOUT_MS, WEBHOOK_MAX_RESPONSE_BYTES]).toEqual([10_000, 64 * 1024]);
    });

    it('gives up at the timeout: no status, the error says so', async () => {
      const client = new WebhookHttpClient({ timeoutMs: 300, maxBodyBytes: 1024, allowPrivate: true });
      const res = await client.post({ url: `http://127.0.0.1:${port}/slow`, headers: {}, body: '{}' });
      client.close();
      expect(res).toEqual({ statusCode: null, failure: 'timeout', error: 'timed out after 300 ms', body: '', retryAfter: null, latencyMs: expect.any(Number) });
    });

    it('reads the response body up to the cap only', async () => {
      const client = new WebhookHttpClient({ timeoutMs: 5000, maxBodyBytes: 1000, allowPrivate: true });
      const res = await client.post({ url: `http://127.0.0.1:${port}/big`, headers: {}, body: '{}' });
      client.close();
      expect(res).toEqual({ statusCode: 200, failure: null, error: null, body: 'x'.repeat(1000), retryAfter: null, latencyMs: expect.any(Number) });
    });

    it("keeps a failed answer's Retry-After as sent (a 2xx's is not read)", async () => {
      const client = new WebhookHttpClient({ timeoutMs: 5000, maxBodyBytes: 1000, allowPrivate: true });
      const busy = await client.post({ url: `http://127.0.0.1:${port}/busy`, headers: {}, body: '{}' });
      const fine = await client.post({ url: `http://127.0.0.1:${port}/fine-after`, headers: {}, body: '{}' });
      client.close();
      expect(busy).toMatchObject({ statusCode: 503, retryAfter: '120' });
      expect(fine).toMatchObject({ statusCode: 200, retryAfter: null });
    });

    it('goes through an egress proxy when one is set (HTTP CONNECT; the literal-address check still runs here); a proxy refusing the tunnel is a connection_error', async () => {
      const proxy = await startConnectProxy((target) => target.startsWith('refused.example'));
      const { url: proxyUrl, tunnels } = proxy;
      try {
        const viaProxy = new WebhookHttpClient({ timeoutMs: 5000, maxBodyBytes: 1000, allowPrivate: true, proxyUrl });
        const res = await viaProxy.post({ url: `http://127.0.0.1:${port}/fine-after`, headers: {}, body: '{}' });
        const refused = await viaProxy.post({ url: 'http://refused.example:80/in', headers: {}, body: '{}' });
        viaProxy.close();
        expect(res).toMatchObject({ statusCode: 200, failure: null });
        expect(refused).toMatchObject({ statusCode: null, failure: 'connection_error', error: expect.stringContaining('403') });
        expect(tunnels).toEqual([`127.0.0.1:${port}`, 'refused.example:80']);
        const guarded = new WebhookHttpClient({ timeoutMs: 5000, maxBodyBytes: 1000, allowPrivate: false, proxyUrl });
        const literal = await guarded.post({ url: 'https://10.0.0.7/in', headers: {}, body: '{}' });
        guarded.close();
        expect(literal).toMatchObject({ statusCode: null, failure: 'address_refused' });
        expect(tunnels).toHaveLength(2);
      } finally {
        await proxy.close();
      }
    });

    it('a connection that fails: no status, failure connection_error', async () => {
      const closed = createServer();
      await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
      const closedPort = (closed.address() as AddressInfo).port;
      await new Promise<void>((ok) => closed.close(() => ok()));
      const client = new WebhookHttpClient({ timeoutMs: 5000, maxBodyBytes: 1000, allowPrivate: true });
      const res = await client.post({ url: `http://127.0.0.1:${closedPort}/`, headers: {}, body: '{}' });
      client.close();
      expect(res).toMatchObject({ statusCode: null, failure: 'connection_error', error: expect.stringContaining('ECONNREFUSED') });
    });

    it('refuses, at connection time, a public name whose DNS answer now points to a private address (rebinding)', async () => {
      // the outside DNS: hooks.example answered a public address at registration, and now a loopback one
      const rebound: Resolver = (_host, _options, callback) => callback(null, [{ address: '127.0.0.1', family: 4 }]);
      const client = new WebhookHttpClient({ timeoutMs: 5000, maxBodyBytes: 1000, allowPrivate: false, resolve: rebound });
      const res = await client.post({ url: `http://hooks.example:${port}/big`, headers: {}, body: '{}' });
      client.close();
      expect(res).toMatchObject({ statusCode: null, failure: 'address_refused', error: 'hooks.example resolves to a forbidden address (127.0.0.1)' });
      const allowed = new WebhookHttpClient({ timeoutMs: 5000, maxBodyBytes: 10, allowPrivate: true, resolve: rebound });
      expect(await allowed.post({ url: `http://127.0.0.1:${port}/big`, headers: {}, body: '{}' })).toMatchObject({ statusCode: 200 });
      allowed.close();
    });
  });
});
