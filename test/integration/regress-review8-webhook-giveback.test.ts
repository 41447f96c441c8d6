import { queueDeliveries } from '../../src/projections/webhooks/deliveries';
import type { Services } from '../../src/services';
import { intakeOf } from '../../src/workers/webhook-handoff';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { holdFirstAnswer } from '../support/webhook-in-flight';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// Review 8 of a231d3a: handed deliveries past half their lease are given back (due at once for any sender). Attack:
// many aged handed deliveries of a full endpoint and of one with room, given back while a second sender claims and
// the first one's endpoint frees up meanwhile: every delivery posted exactly once, none lost, none left leased.
// PASSES on 3c06d15 (sound).

let bed: WebhookTestBed;
useWebhookTestBed((b) => { bed = b; });

let skew = 0;
const skewed = (): Services => ({ ...bed.t.services, now: () => new Date(Date.now() + skew) });
const message = (endpointId: string, webhookId: string) =>
  ({ endpointId, companyId: SHOP.companyId, webhookId, eventType: 'message.sent', payload: JSON.stringify({ type: 'message.sent', data: { webhookId } }) });

it('aged handed deliveries given back while another sender claims and the full endpoint frees up: each posted once', async () => {
  const full = await bed.register('/r8-full');
  const roomy = await bed.register('/r8-roomy');
  const { log, answerFirst } = holdFirstAnswer(bed, 204, 204);
  const first = startWebhookSender(skewed(), { pollMs: 20, endpointConcurrency: 1, batchSize: 4, concurrency: 1 });
  let second: { stop(): Promise<void> } | undefined;
  const ids: string[] = [];
  try {
    await bed.queue(full.id, 1, 'r8-first-');
    await waitUntil(async () => log.includes('start 1'), 20_000, 'the held request');
    const now = skewed().now();
    const { intake } = intakeOf(bed.t.db.pool)!;
    const leaseUntil = intake.leaseUntil(now);
    const handed = [
      ...Array.from({ length: 12 }, (_, i) => message(full.id, `msg_r8-full-${i}`)),
      ...Array.from({ length: 6 }, (_, i) => message(roomy.id, `msg_r8-roomy-${i}`)),
    ];
    const { claimed } = await queueDeliveries(bed.t.db.pool, handed, now, { count: handed.length, until: leaseUntil });
    expect(claimed).toHaveLength(handed.length);
    intake.receive(claimed, leaseUntil);
    ids.push(...claimed.map((d) => d.delivery_id));
    skew = 45_000; // past half the lease: given back
    second = startWebhookSender(skewed(), { pollMs: 20 });
    answerFirst(); // the full endpoint frees up meanwhile: the first sender may claim what is due again too
    await waitUntil(async () => {
      const { rows } = await bed.t.db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM webhooks.deliveries WHERE delivery_id = ANY($1::uuid[]) AND status = 'succeeded'`, [ids]);
      return rows[0].n === ids.length;
    }, 60_000, 'every handed delivery posted');
  } finally {
    answerFirst();
    await second?.stop();
    await first.stop();
    skew = 0;
  }
  const posted = bed.receiver.received.filter((r) => r.path === '/r8-full' || r.path === '/r8-roomy').map((r) => r.headers['webhook-id'] as string);
  const counts = new Map<string, number>();
  for (const id of posted) counts.set(id, (counts.get(id) ?? 0) + 1);
  expect([...counts.values()].every((n) => n === 1)).toBe(true);
  expect(counts.size).toBe(19);
  const { rows } = await bed.t.db.pool.query<{ attempts: number; claimed_until: Date | null }>(
    'SELECT attempts, claimed_until FROM webhooks.deliveries WHERE delivery_id = ANY($1::uuid[])', [ids]);
  expect(rows.every((r) => r.attempts === 1 && r.claimed_until === null)).toBe(true);
});
