import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { queueDeliveries } from '../../src/projections/webhooks/deliveries';
import type { Services } from '../../src/services';
import { intakeOf } from '../../src/workers/webhook-handoff';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { claimElsewhere, holdFirstAnswer } from '../support/webhook-in-flight';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// The edges of a claim's lease (docs/webhooks.md, "Lease edges (review 6)"), with a real sender, receiver and
// Postgres. The sender under test reads a clock of its own (`skew` ms ahead of the machine's), so a lease can be
// well used without waiting for it: the rows' leases are that clock's, and so are the claims' due checks.

const BASE = '/api/v1/webhook-endpoints/';
const LEASE_MS = 60_000;
let bed: WebhookTestBed;
useWebhookTestBed((b) => { bed = b; });

let skew = 0;
afterEach(() => { skew = 0; });
/** the bed's services with the sender's clock `skew` ms ahead */
const skewed = (): Services => ({ ...bed.t.services, now: () => new Date(Date.now() + skew) });

const row = async (deliveryId: string) =>
  (await bed.t.db.pool.query(
    'SELECT status, attempts, next_attempt_at, claimed_until, retry_asked FROM webhooks.deliveries WHERE delivery_id = $1', [deliveryId],
  )).rows[0];
const attemptsOf = async (deliveryId: string) =>
  (await bed.t.db.pool.query<{ attempted_at: Date; status_code: number | null; error: string | null; next_retry_at: Date | null }>(
    'SELECT attempted_at, status_code, error, next_retry_at FROM webhooks.attempts WHERE delivery_id = $1 ORDER BY attempt_id', [deliveryId],
  )).rows;
const message = (endpointId: string, webhookId: string) =>
  ({ endpointId, companyId: SHOP.companyId, webhookId, eventType: 'message.sent', payload: JSON.stringify({ type: 'message.sent', data: { webhookId } }) });

it('(a) handed deliveries that waited for a full endpoint past half their lease are given back, due at once: posted before their lease ends', async () => {
  const ep = await bed.register('/aged-handoff');
  const { log, answerFirst } = holdFirstAnswer(bed, 204, 204);
  const services = skewed();
  const sender = startWebhookSender(services, { pollMs: 20, endpointConcurrency: 1 }); // one request at a time: the rest wait
  let leaseUntil!: Date;
  let handed!: string[];
  try {
    await bed.queue(ep.id, 1, 'aged-first-');
    await waitUntil(async () => log.includes('start 1'), 20_000, 'the first request');
    // the endpoint is full: what the fan-out hands over now stays handed (as the fan-out hands: queued claimed, then received)
    const now = services.now();
    const { intake } = intakeOf(bed.t.db.pool)!;
    leaseUntil = intake.leaseUntil(now);
    const { claimed } = await queueDeliveries(bed.t.db.pool, [0, 1, 2].map((i) => message(ep.id, `msg_aged-handed-${i}`)), now, { count: 3, until: leaseUntil });
    intake.receive(claimed, leaseUntil);
    handed = claimed.map((d) => d.delivery_id);
    skew = 50_000; // 50 of the 60 s used while they waited
    answerFirst();
    await waitUntil(async () => (await Promise.all(handed.map(row))).every((r) => r.status === 'succeeded'), 30_000, 'the handed deliveries posted');
  } finally {
    answerFirst();
    await sender.stop();
  }
  // before: dropped by the sender, neither posted nor given back, due only when their lease ended (10 s later here)
  for (const id of handed) {
    const attempts = await attemptsOf(id);
    expect(attempts.map((a) => a.status_code)).toEqual([204]);
    expect(attempts[0].attempted_at.getTime()).toBeLessThan(leaseUntil.getTime());
    expect(await row(id)).toMatchObject({ status: 'succeeded', attempts: 1, claimed_until: null });
  }
  expect(log).toEqual(['start 1', 'answer 1', 'start 2', 'answer 2', 'start 3', 'answer 3', 'start 4', 'answer 4']);
  expect(bed.receiver.received.filter((r) => r.path === '/aged-handoff').map((r) => r.headers['webhook-id']).sort())
    .toEqual(['msg_aged-first-0', 'msg_aged-handed-0', 'msg_aged-handed-1', 'msg_aged-handed-2']);
});

it('(a) a handed delivery aged while its sender has no room at all is given back too: another sender posts it before its lease ends', async () => {
  const busy = await bed.register('/aged-busy');
  const other = await bed.register('/aged-other');
  const { log, answerFirst } = holdFirstAnswer(bed, 204, 204);
  const services = skewed();
  // room for one delivery in all: the held request takes it
  const sender = startWebhookSender(services, { pollMs: 20, batchSize: 1, concurrency: 1 });
  let second: { stop(): Promise<void> } | undefined;
  let leaseUntil!: Date;
  let deliveryId!: string;
  try {
    await bed.queue(busy.id, 1, 'aged-busy-');
    await waitUntil(async () => log.includes('start 1'), 20_000, 'the held request');
    const now = services.now();
    const { intake } = intakeOf(bed.t.db.pool)!;
    leaseUntil = intake.leaseUntil(now);
    const { claimed } = await queueDeliveries(bed.t.db.pool, [message(other.id, 'msg_aged-other-0')], now, { count: 1, until: leaseUntil });
    intake.receive(claimed, leaseUntil);
    deliveryId = claimed[0].delivery_id;
    skew = 50_000;
    // another process's sender: it may claim only what is due in the table
    second = startWebhookSender(skewed(), { pollMs: 20 });
    await waitUntil(async () => (await row(deliveryId)).status === 'succeeded', 30_000, 'the handed delivery posted');
    expect(log).toEqual(['start 1', 'start 2', 'answer 2']); // posted while the first sender's request is still held
  } finally {
    answerFirst();
    await second?.stop();
    await sender.stop();
  }
  const attempts = await attemptsOf(deliveryId);
  expect(attempts.map((a) => a.status_code)).toEqual([204]);
  expect(attempts[0].attempted_at.getTime()).toBeLessThan(leaseUntil.getTime());
  expect(bed.receiver.received.filter((r) => r.path === '/aged-other')).toHaveLength(1);
});

describe('(b) a post without an answer is recorded at once and retried on its schedule, not at its lease end', () => {
  // the retry after the failure is due 300 ms later (no jitter): the lease (60 s, on a clock that does not move here)
  // would hold it for a minute
  const senderOptions = { pollMs: 20, timeoutMs: 1_000, schedule: [300, 300], random: () => 0.5 };

  it('a connection the receiver drops mid-request (connection_error)', async () => {
    let requests = 0;
    const server = createServer((req, res) => {
      if (++requests === 1) return void req.socket.destroy();
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/dropping`;
    const created = await bed.t.app.inject({ method: 'POST', url: BASE, headers: { 'x-api-key': SHOP.key }, payload: { url, event_types: ['message.sent'] } });
    expect(created.statusCode).toBe(201);
    const { queued: [deliveryId] } = await bed.queue(created.json().id, 1, 'dropped-');
    const sender = startWebhookSender(skewed(), senderOptions);
    try {
      await waitUntil(async () => (await row(deliveryId)).status === 'succeeded', 20_000, 'the retry after the dropped connection');
    } finally {
      await sender.stop();
      server.closeAllConnections();
      await new Promise((ok) => server.close(ok));
    }
    const [failed, ok] = await attemptsOf(deliveryId);
    expect(failed).toMatchObject({ status_code: null, error: expect.any(String), next_retry_at: expect.any(Date) });
    expect(failed.next_retry_at!.getTime() - failed.attempted_at.getTime()).toBeLessThan(LEASE_MS); // the schedule's wait, not the lease
    expect(ok.status_code).toBe(204);
    expect(await row(deliveryId)).toMatchObject({ status: 'succeeded', attempts: 2, claimed_until: null });
    expect(requests).toBe(2);
  });

  it('a request the receiver does not answer in time (timeout)', async () => {
    const ep = await bed.register('/silent');
    const { log, answerFirst } = holdFirstAnswer(bed, 204, 204);
    const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'silent-');
    const sender = startWebhookSender(skewed(), senderOptions);
    try {
      await waitUntil(async () => (await row(deliveryId)).status === 'succeeded', 20_000, 'the retry after the timeout');
    } finally {
      answerFirst();
      await sender.stop();
    }
    const [timedOut, ok] = await attemptsOf(deliveryId);
    expect(timedOut).toMatchObject({ status_code: null, error: 'timed out after 1000 ms' });
    expect(ok.status_code).toBe(204);
    expect(await row(deliveryId)).toMatchObject({ status: 'succeeded', attempts: 2, claimed_until: null });
    expect(log.slice(0, 2)).toEqual(['start 1', 'start 2']); // the second request while the first still hangs: it had timed out
  });
});

it('(c) a retry of a delivery under a dead sender\'s lease is noted and waits for that lease: then posted once', async () => {
  const ep = await bed.register('/dead-claimer');
  const { queued: [deliveryId] } = await bed.queue(ep.id, 1, 'dead-claimer-');
  // a sender that claimed it and died before posting (nothing will record or release it)
  const [claimed] = await claimElsewhere(bed.t.db.pool);
  expect(claimed.delivery_id).toBe(deliveryId);
  const res = await bed.t.app.inject({ method: 'POST', url: `${BASE}${ep.id}/deliveries/${deliveryId}/retry/`, headers: { 'x-api-key': SHOP.key } });
  expect([res.statusCode, res.json()]).toEqual([202, { delivery_id: deliveryId, webhook_id: 'msg_dead-claimer-0', status: 'queued' }]);
  const noted = await row(deliveryId);
  expect(noted).toMatchObject({ status: 'pending', attempts: 0, retry_asked: true });
  expect(noted.next_attempt_at).toEqual(noted.claimed_until); // still that claim's: no sender may take it beside a live one
  expect(await claimElsewhere(bed.t.db.pool)).toEqual([]);
  // the lease ended, by every clock (a sender ahead of Postgres no longer ends another's lease: docs/reliability.md)
  await bed.t.db.pool.query(
    `UPDATE webhooks.deliveries SET next_attempt_at = next_attempt_at - interval '61 seconds', claimed_until = claimed_until - interval '61 seconds' WHERE delivery_id = $1`,
    [deliveryId]);
  const sender = startWebhookSender(skewed(), { pollMs: 20 });
  try {
    await waitUntil(async () => (await row(deliveryId)).status === 'succeeded', 20_000, 'the delivery after the lease');
  } finally {
    await sender.stop();
  }
  expect(await row(deliveryId)).toMatchObject({ status: 'succeeded', attempts: 1, retry_asked: false, claimed_until: null });
  expect(bed.receiver.received.filter((r) => r.path === '/dead-claimer')).toHaveLength(1);
});
