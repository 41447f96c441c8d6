import { Client } from 'pg';
import { type ClaimedDelivery, queueDeliveries } from '../../src/projections/webhooks/deliveries';
import { fanOutBatch, type IdleHint, startWebhookFanOut } from '../../src/workers/webhook-fanout';
import { intakeOf, registerIntake } from '../../src/workers/webhook-handoff';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// The hand-off (docs/webhooks.md, "Hand-off"): the fan-out queues fresh deliveries claimed by the sender of its
// process and passes them in memory; the sender posts them without claiming them from the table, and a sender
// that stops makes those it did not post due at once. Real Postgres, app, fan-out, sender and receiver.

const LEASE_MS = 60_000;

describe('webhook hand-off', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let register: WebhookTestBed['register'];
  useWebhookTestBed((bed) => ({ t, receiver, register } = bed));
  const send = async (recipient: string) => {
    const res = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: recipient },
    });
    expect(res.statusCode).toBe(200);
  };
  const deliveriesOf = async (endpointId: string) =>
    (await t.db.pool.query<{ delivery_id: string; status: string; next_attempt_at: Date | null; attempts: number }>(
      'SELECT delivery_id, status, next_attempt_at, attempts FROM webhooks.deliveries WHERE endpoint_id = $1 ORDER BY created_at, webhook_id', [endpointId],
    )).rows;

  it('the fan-out hands as many fresh deliveries as the intake has room for, queued claimed; the rest are queued due now', async () => {
    const ep = await register('/fanout');
    const handed: ClaimedDelivery[] = [];
    let leaseUntil: Date | undefined;
    const unregister = registerIntake(t.db.pool, {
      capacity: () => 2 - handed.length,
      leaseUntil: (now) => new Date(now.getTime() + LEASE_MS),
      receive: (deliveries, until) => {
        handed.push(...deliveries);
        leaseUntil = until;
      },
    });
    try {
      for (const phone of ['+5491155550101', '+5491155550102', '+5491155550103']) await send(phone);
      const before = Date.now();
      const fanOut = startWebhookFanOut(t.services, { gatherMs: 5, pollMs: 20 });
      try {
        await waitUntil(async () => (await deliveriesOf(ep.id)).length === 3, 10_000, 'three deliveries queued');
      } finally {
        await fanOut.stop();
      }
      const rows = await deliveriesOf(ep.id);
      expect(handed).toHaveLength(2);
      expect(handed.every((d) => d.endpoint_id === ep.id && d.attempts === 0 && JSON.parse(d.payload).type === 'message.sent')).toBe(true);
      const byId = new Map(rows.map((r) => [r.delivery_id, r]));
      for (const d of handed) expect(byId.get(d.delivery_id)!.next_attempt_at).toEqual(leaseUntil);
      const due = rows.filter((r) => !handed.some((d) => d.delivery_id === r.delivery_id));
      expect(due).toHaveLength(1);
      expect(due[0].status).toBe('pending');
      expect(due[0].next_attempt_at!.getTime()).toBeLessThanOrEqual(Date.now());
      expect(due[0].next_attempt_at!.getTime()).toBeGreaterThanOrEqual(before - 1000);
    } finally {
      unregister();
    }
    expect(intakeOf(t.db.pool)).toBeUndefined();
  });

  it('a sender posts what it is handed without waiting for its poll, and releases what it did not post when it stops', async () => {
    const ep = await register('/handed');
    let release!: () => void;
    const held = new Promise<void>((ok) => (release = ok));
    let first = true;
    receiver.respond(async (r) => {
      if (r.path === '/handed' && first) {
        first = false;
        await held;
      }
      return 204;
    });
    // one delivery per round, and a poll far beyond the test: only the hand-off can bring the deliveries to it
    const sender = startWebhookSender(t.services, { batchSize: 1, concurrency: 1, pollMs: 120_000 });
    await new Promise((r) => setTimeout(r, 200)); // its first claim of the table has run (and found nothing)
    const now = t.services.now();
    const intake = intakeOf(t.db.pool);
    expect(intake?.capacity).toBe(1); // batchSize x concurrency
    const leaseUntil = intake!.intake.leaseUntil(now);
    const queued = await queueDeliveries(t.db.pool, [0, 1, 2].map((i) => ({
      endpointId: ep.id, companyId: SHOP.companyId, webhookId: `msg_handed${i}`, eventType: 'message.sent', payload: JSON.stringify({ type: 'message.sent', data: { i } }),
    })), now, { count: 3, until: leaseUntil });
    expect(queued.queued).toHaveLength(3);
    intake!.intake.receive(queued.claimed, leaseUntil);
    await waitUntil(async () => !first, 30_000, 'the first handed delivery posted');
    expect((await deliveriesOf(ep.id)).every((r) => r.next_attempt_at?.getTime() === leaseUntil.getTime())).toBe(true);

    const stopped = sender.stop(); // the round in flight finishes; the two deliveries still handed are released
    release();
    await stopped;
    const rows = await deliveriesOf(ep.id);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'pending', 'pending']);
    expect(rows[0].attempts).toBe(1);
    for (const r of rows.slice(1)) expect(r.next_attempt_at!.getTime()).toBeLessThanOrEqual(Date.now());
    expect(receiver.received.filter((r) => r.path === '/handed').map((r) => r.headers['webhook-id'])).toEqual(['msg_handed0']);
  });

  it('queues each payload byte for byte, in order (quotes, backslashes, escapes, emoji, line breaks)', async () => {
    const ep = await register('/payloads');
    const payloads = [
      JSON.stringify({ type: 'message.sent', data: { name: 'Ana "la jefa" \\ O\'Neil', note: 'línea 1\nlínea 2\t😀', nul: '\u0000' } }),
      '{"raw":"\\u0000 and \\ud83d\\ude00 kept as escapes","quote":"\\""}',
      JSON.stringify({ type: 'message.sent', data: { empty: '', array: ['{', '}', '[', ']', ','] } }),
    ];
    const { queued } = await queueDeliveries(t.db.pool, payloads.map((payload, i) => ({
      endpointId: ep.id, companyId: SHOP.companyId, webhookId: `msg_payload_${i}`, eventType: 'message.sent', payload,
    })), new Date());
    expect(queued).toHaveLength(3);
    const { rows } = await t.db.pool.query<{ delivery_id: string; webhook_id: string; payload: string }>(
      'SELECT delivery_id, webhook_id, payload FROM webhooks.deliveries WHERE delivery_id = ANY($1::uuid[])', [queued]);
    const byId = new Map(rows.map((r) => [r.delivery_id, r]));
    expect(queued.map((id) => byId.get(id)!.webhook_id)).toEqual(['msg_payload_0', 'msg_payload_1', 'msg_payload_2']);
    expect(queued.map((id) => byId.get(id)!.payload)).toEqual(payloads);
  });

  it('an idle fan-out looks for new events in one read, without its lock or checkpoint; a new event is fanned out as before', async () => {
    const ep = await register('/idle');
    await t.db.pool.query(`INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ('fanout', '') ON CONFLICT DO NOTHING`);
    const idle: IdleHint = {};
    while ((await fanOutBatch(t.services, 1000, idle)) > 0); // everything so far, then nothing after it
    expect(idle.nothingAfter).toBeDefined();
    // the projection runner polls the log with the same statement: paused while the fan-out's statements are counted
    // (a poll landing in the window counted as a second read on a loaded machine)
    await t.services.runner.stop();
    const query = jest.spyOn(Client.prototype, 'query');
    const statements = () => query.mock.calls.map(([q]) => (typeof q === 'string' ? q : (q as { text: string }).text));
    try {
      expect(await fanOutBatch(t.services, 1000, idle)).toBe(0);
      expect(statements().filter((q) => /advisory|fanout_checkpoint/.test(q))).toEqual([]);
      expect(statements().filter((q) => /FROM es\.events/.test(q))).toHaveLength(1);
      // every 10 s the whole check runs anyway (a checkpoint set back by hand is seen)
      idle.since! -= 10_000;
      query.mockClear();
      expect(await fanOutBatch(t.services, 1000, idle)).toBe(0);
      expect(statements().filter((q) => /pg_try_advisory_lock/.test(q))).toHaveLength(1);
      await t.services.runner.start();
      query.mockClear();
      await send('+5491155550199');
      query.mockClear();
      expect(await fanOutBatch(t.services, 1000, idle)).toBeGreaterThan(0);
      expect(statements().filter((q) => /pg_try_advisory_lock/.test(q))).toHaveLength(1);
    } finally {
      query.mockRestore();
    }
    expect((await deliveriesOf(ep.id)).map((r) => r.status)).toEqual(['pending']);
  });
});
