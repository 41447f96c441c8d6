import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startWebhookFanOut } from '../../src/workers/webhook-fanout';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { invoiceVariables, SHOP, waitUntil } from '../support/sends';
import { metricSample as sample } from '../support/metrics';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// Client webhooks on GET /metrics (docs/webhooks.md, "Operating"), on real Postgres and a real receiver: the
// sender's attempts by outcome and their duration, the deliveries it gave up, the endpoints it disabled, and the
// queue's backlog read from the database at scrape time.

const BASE = '/api/v1/webhook-endpoints/';

describe('webhook metrics', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, receiver, register, queue } = bed));

  const scrape = async () => {
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    return res.body;
  };
  const attemptsOf = async (endpointIds: string[]) =>
    (await t.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhooks.attempts WHERE endpoint_id = ANY($1)', [endpointIds])).rows[0].n;
  const delta = (before: string, after: string, series: string) => sample(after, series) - sample(before, series);

  it('counts attempts by outcome with their duration, the deliveries given up and an endpoint disabled by a 410', async () => {
    const ok = await register('/m-ok');
    const bad = await register('/m-500');
    const gone = await register('/m-410');
    receiver.respond((r) => (r.path === '/m-500' ? 500 : r.path === '/m-410' ? 410 : 204));
    const before = await scrape();
    await queue(ok.id, 3, 'm-ok');
    await queue(bad.id, 2, 'm-500');
    await queue(gone.id, 1, 'm-410');
    const sender = startWebhookSender(t.services, { pollMs: 10, schedule: [] }); // no retries: a failed attempt is the last
    try {
      await waitUntil(async () => (await attemptsOf([ok.id, bad.id, gone.id])) === 6, 10_000, 'six attempts');
      await waitUntil(async () => (await t.app.inject({ method: 'GET', url: `${BASE}${gone.id}/`, headers: { 'x-api-key': SHOP.key } })).json().enabled === false, 10_000, 'the 410 endpoint disabled');
    } finally {
      await sender.stop();
    }
    const after = await scrape();
    expect({
      success: delta(before, after, 'switchboard_webhook_attempts_total{outcome="success"}'),
      httpError: delta(before, after, 'switchboard_webhook_attempts_total{outcome="http_error"}'),
      timedSuccess: delta(before, after, 'switchboard_webhook_attempt_duration_seconds_count{outcome="success"}'),
      timedHttpError: delta(before, after, 'switchboard_webhook_attempt_duration_seconds_count{outcome="http_error"}'),
      failed: delta(before, after, 'switchboard_webhook_deliveries_failed_total'),
      gone: delta(before, after, 'switchboard_webhook_endpoints_disabled_total{reason="gone"}'),
    }).toEqual({ success: 3, httpError: 3, timedSuccess: 3, timedHttpError: 3, failed: 3, gone: 1 });
  });

  it('counts a timeout and a refused connection apart from answers', async () => {
    const slow = await register('/m-slow');
    let release!: () => void;
    const held = new Promise<void>((ok) => (release = ok));
    receiver.respond(async (r) => {
      if (r.path === '/m-slow') await held;
      return 204;
    });
    // an endpoint on a port nothing listens on any more
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((ok) => closed.close(() => ok()));
    const created = await t.app.inject({ method: 'POST', url: BASE, headers: { 'x-api-key': SHOP.key }, payload: { url: `http://127.0.0.1:${port}/gone-away`, event_types: ['message.sent'] } });
    expect(created.statusCode).toBe(201);
    const refused = created.json() as { id: string };
    const before = await scrape();
    await queue(slow.id, 1, 'm-slow');
    await queue(refused.id, 2, 'm-refused');
    const sender = startWebhookSender(t.services, { pollMs: 10, schedule: [], timeoutMs: 300 });
    try {
      await waitUntil(async () => (await attemptsOf([slow.id, refused.id])) === 3, 10_000, 'three attempts');
    } finally {
      release();
      await sender.stop();
    }
    const after = await scrape();
    expect({
      timeout: delta(before, after, 'switchboard_webhook_attempts_total{outcome="timeout"}'),
      connectionError: delta(before, after, 'switchboard_webhook_attempts_total{outcome="connection_error"}'),
      success: delta(before, after, 'switchboard_webhook_attempts_total{outcome="success"}'),
    }).toEqual({ timeout: 1, connectionError: 2, success: 0 });
    expect(delta(before, after, 'switchboard_webhook_attempt_duration_seconds_count{outcome="timeout"}')).toBe(1);
    expect(delta(before, after, 'switchboard_webhook_attempt_duration_seconds_count{outcome="connection_error"}')).toBe(2);
  });

  it('the backlog: due deliveries of enabled endpoints and how long the oldest has waited, read at scrape time', async () => {
    const ep = await register('/m-backlog');
    const base = await scrape();
    const dueBefore = sample(base, 'switchboard_webhook_deliveries_due');
    // no sender runs: five deliveries due for an hour
    await queue(ep.id, 5, 'm-backlog', new Date(t.services.now().getTime() - 3_600_000));
    await new Promise((r) => setTimeout(r, 1_100)); // the gauges read the database at most once a second
    const queued = await scrape();
    expect(sample(queued, 'switchboard_webhook_deliveries_due')).toBe(dueBefore + 5);
    const oldest = sample(queued, 'switchboard_webhook_oldest_due_seconds');
    expect(oldest).toBeGreaterThanOrEqual(3_600);
    expect(oldest).toBeLessThan(3_600 + 600);
    // disabled, its deliveries are set aside: no sender could take them, so they are not the senders' backlog
    const patched = await t.app.inject({ method: 'PATCH', url: `${BASE}${ep.id}/`, headers: { 'x-api-key': SHOP.key }, payload: { enabled: false } });
    expect(patched.statusCode).toBe(200);
    await new Promise((r) => setTimeout(r, 1_100));
    const aside = await scrape();
    expect(sample(aside, 'switchboard_webhook_deliveries_due')).toBe(dueBefore);
    expect(sample(aside, 'switchboard_webhook_oldest_due_seconds')).toBeLessThan(3_600);
  });

  it('the fan-out lag: the age of the first event the fan-out has not passed, 0 once it has', async () => {
    const fanOutLag = async () => {
      await new Promise((r) => setTimeout(r, 1_100));
      return sample(await scrape(), 'switchboard_webhook_fanout_lag_seconds');
    };
    let fanOut = startWebhookFanOut(t.services, { pollMs: 20 });
    await waitUntil(async () => (await fanOutLag()) === 0, 10_000, 'the fan-out at the head');
    await fanOut.stop();
    const sent = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'invoice_ready', language: 'es', recipient_phone: '+5491155551234', variables: invoiceVariables, button_variables: { button_0: 'F-0001' } },
    });
    expect(sent.statusCode).toBe(200);
    expect(await fanOutLag()).toBeGreaterThanOrEqual(1); // the send's events, a second old, not fanned out
    fanOut = startWebhookFanOut(t.services, { pollMs: 20 });
    try {
      await waitUntil(async () => (await fanOutLag()) === 0, 10_000, 'the fan-out caught up');
    } finally {
      await fanOut.stop();
    }
  });
});
