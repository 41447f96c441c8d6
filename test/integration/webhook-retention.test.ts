import { purgeExpiredWebhookLog, startWebhookRetention } from '../../src/workers/webhook-retention';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { metricSample } from '../support/metrics';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// The webhook log's retention (docs/webhooks.md, "Retention"), on real Postgres and a real receiver: attempts
// logged and deliveries finished more than WEBHOOKS_RETENTION_DAYS (30 by default) ago are deleted; pending
// deliveries and younger rows stay, and the deliveries page shows what is left.

const DAY_MS = 86_400_000;

describe('webhook log retention', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, receiver, register, queue } = bed));

  const attemptsOf = async (endpointId: string) =>
    (await t.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhooks.attempts WHERE endpoint_id = $1', [endpointId])).rows[0].n;
  /** delivers what is queued for the endpoint (one attempt each), with the receiver answering `status` */
  const deliver = async (endpointId: string, attempts: number, status: (webhookId: string) => number) => {
    receiver.respond((r) => status(String(r.headers['webhook-id'])));
    const sender = startWebhookSender(t.services, { pollMs: 10 });
    try {
      await waitUntil(async () => (await attemptsOf(endpointId)) === attempts, 10_000, `${attempts} attempts`);
    } finally {
      await sender.stop();
    }
  };
  /** moves a delivery's attempts, and its finishing time if it finished, `days` into the past */
  const age = async (webhookIds: string[], days: number) => {
    const at = new Date(t.services.now().getTime() - days * DAY_MS);
    await t.db.pool.query(
      `UPDATE webhooks.attempts a SET attempted_at = $2 FROM webhooks.deliveries d WHERE d.delivery_id = a.delivery_id AND d.webhook_id = ANY($1)`,
      [webhookIds, at],
    );
    await t.db.pool.query(`UPDATE webhooks.deliveries SET completed_at = $2 WHERE webhook_id = ANY($1) AND completed_at IS NOT NULL`, [webhookIds, at]);
  };
  const deliveriesOf = async (endpointId: string) =>
    (await t.db.pool.query<{ webhook_id: string; status: string }>(
      'SELECT webhook_id, status FROM webhooks.deliveries WHERE endpoint_id = $1 ORDER BY webhook_id', [endpointId],
    )).rows;
  const page = async (endpointId: string) => {
    const res = await t.app.inject({ method: 'GET', url: `/api/v1/webhook-endpoints/${endpointId}/deliveries/`, headers: { 'x-api-key': SHOP.key } });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { count: number; results: Array<{ webhook_id: string; status_code: number }> };
    return { count: body.count, webhookIds: body.results.map((r) => r.webhook_id).sort() };
  };

  it('deletes attempts and finished deliveries older than the retention, and nothing else', async () => {
    const endpoint = await register('/retention');
    // older first, as in life: attempt ids follow the time of recording
    await queue(endpoint.id, 4, 'old');
    await deliver(endpoint.id, 4, (id) => (id === 'msg_old3' ? 500 : 204)); // old3 failed once: pending, a retry due
    await age(['msg_old0', 'msg_old1', 'msg_old2', 'msg_old3'], 31);
    await queue(endpoint.id, 2, 'young');
    await deliver(endpoint.id, 6, () => 204);
    await age(['msg_young0', 'msg_young1'], 29);

    const purged = async () => {
      const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
      const value = (table: string) => metricSample(text, `switchboard_webhook_log_purged_total{table="${table}"}`);
      return { attempts: value('attempts'), deliveries: value('deliveries') };
    };
    const before = await purged();
    const report = await purgeExpiredWebhookLog(t.services, { batchSize: 2 }); // several batches
    expect(report).toEqual({ skipped: false, attempts: 4, deliveries: 3, orphaned: 0 });
    const after = await purged();
    expect({ attempts: after.attempts - before.attempts, deliveries: after.deliveries - before.deliveries }).toEqual({ attempts: 4, deliveries: 3 });
    expect(await deliveriesOf(endpoint.id)).toEqual([
      { webhook_id: 'msg_old3', status: 'pending' }, // pending deliveries are never deleted, however old
      { webhook_id: 'msg_young0', status: 'succeeded' },
      { webhook_id: 'msg_young1', status: 'succeeded' },
    ]);
    expect(await page(endpoint.id)).toEqual({ count: 2, webhookIds: ['msg_young0', 'msg_young1'] });
    expect(await purgeExpiredWebhookLog(t.services)).toEqual({ skipped: false, attempts: 0, deliveries: 0, orphaned: 0 });
  });

  it('drops a deleted endpoint\'s deliveries once the retention has passed since', async () => {
    const endpoint = await register('/retention-deleted');
    receiver.respond(() => 204);
    await queue(endpoint.id, 3, 'deleted');
    const res = await t.app.inject({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${endpoint.id}/`, headers: { 'x-api-key': SHOP.key } });
    expect(res.statusCode).toBe(204);
    expect((await deliveriesOf(endpoint.id)).map((d) => d.status)).toEqual(['dropped', 'dropped', 'dropped']);

    expect(await purgeExpiredWebhookLog(t.services)).toMatchObject({ deliveries: 0 });
    await age(['msg_deleted0', 'msg_deleted1', 'msg_deleted2'], 31);
    expect(await purgeExpiredWebhookLog(t.services)).toMatchObject({ deliveries: 3 });
    expect(await deliveriesOf(endpoint.id)).toEqual([]);
  });

  it("forgets a deleted endpoint's attempt count once its attempts are purged; a live endpoint's count stays right", async () => {
    const gone = await register('/retention-count-gone');
    const live = await register('/retention-count-live');
    await queue(gone.id, 2, 'cgone');
    await deliver(gone.id, 2, () => 204);
    await queue(live.id, 2, 'clive');
    await deliver(live.id, 2, () => 204);
    expect((await t.app.inject({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${gone.id}/`, headers: { 'x-api-key': SHOP.key } })).statusCode).toBe(204);
    const counted = async () => Object.fromEntries((await t.db.pool.query<{ endpoint_id: string; attempts: string }>(
      'SELECT endpoint_id, attempts FROM webhooks.attempt_counts WHERE endpoint_id = ANY($1)', [[gone.id, live.id]])).rows.map((r) => [r.endpoint_id, Number(r.attempts)]));
    expect(await counted()).toEqual({ [gone.id]: 2, [live.id]: 2 });
    await age(['msg_cgone0', 'msg_cgone1', 'msg_clive0', 'msg_clive1'], 31);
    await purgeExpiredWebhookLog(t.services);
    expect(await counted()).toEqual({}); // both at 0: the rows go (a missing row reads as 0)
    expect(await page(live.id)).toEqual({ count: 0, webhookIds: [] });
    await queue(live.id, 1, 'clive-again');
    await deliver(live.id, 1, () => 204);
    expect(await counted()).toEqual({ [live.id]: 1 });
    expect(await page(live.id)).toEqual({ count: 1, webhookIds: ['msg_clive-again0'] });
  });

  it("drops a deleted endpoint's deliveries that a racing fan-out queued after the deletion, once an hour overdue; a live endpoint's overdue ones stay", async () => {
    const gone = await register('/retention-orphans-gone');
    const live = await register('/retention-orphans-live');
    expect((await t.app.inject({ method: 'DELETE', url: `/api/v1/webhook-endpoints/${gone.id}/`, headers: { 'x-api-key': SHOP.key } })).statusCode).toBe(204);
    // a fan-out batch that read the endpoint before its deletion commits after it: its deliveries stay pending
    const now = t.services.now().getTime();
    await queue(gone.id, 3, 'orphan-old', new Date(now - 2 * 3600_000));
    await queue(gone.id, 1, 'orphan-young', new Date(now - 60_000));
    await queue(live.id, 2, 'overdue-live', new Date(now - 2 * 3600_000)); // no sender running: overdue, not orphaned
    expect(await purgeExpiredWebhookLog(t.services)).toMatchObject({ skipped: false, orphaned: 3 });
    expect(await deliveriesOf(gone.id)).toEqual([
      { webhook_id: 'msg_orphan-old0', status: 'dropped' }, { webhook_id: 'msg_orphan-old1', status: 'dropped' },
      { webhook_id: 'msg_orphan-old2', status: 'dropped' }, { webhook_id: 'msg_orphan-young0', status: 'pending' },
    ]);
    expect(await deliveriesOf(live.id)).toEqual([{ webhook_id: 'msg_overdue-live0', status: 'pending' }, { webhook_id: 'msg_overdue-live1', status: 'pending' }]);
    await deliver(live.id, 2, () => 204);
  });

  it('purges on its schedule (every second here) and stops', async () => {
    const endpoint = await register('/retention-scheduled');
    await queue(endpoint.id, 2, 'scheduled');
    await deliver(endpoint.id, 2, () => 204);
    await age(['msg_scheduled0'], 31);
    const purge = startWebhookRetention(t.services, { schedule: '* * * * * *' });
    try {
      await waitUntil(async () => (await deliveriesOf(endpoint.id)).length === 1 || undefined, 30_000, 'the expired delivery purged');
    } finally {
      await purge.stop();
    }
    expect(await deliveriesOf(endpoint.id)).toEqual([{ webhook_id: 'msg_scheduled1', status: 'succeeded' }]);
    expect(await attemptsOf(endpoint.id)).toBe(1);
  });

  it('lets one process purge at a time', async () => {
    const endpoint = await register('/retention-locked');
    await queue(endpoint.id, 1, 'locked');
    await deliver(endpoint.id, 1, () => 204);
    await age(['msg_locked0'], 31);
    const other = await t.db.pool.connect();
    try {
      await other.query(`SELECT pg_advisory_lock(hashtext('webhook-log-purge'))`);
      expect(await purgeExpiredWebhookLog(t.services)).toEqual({ skipped: true, attempts: 0, deliveries: 0, orphaned: 0 });
      expect(await deliveriesOf(endpoint.id)).toHaveLength(1);
    } finally {
      await other.query(`SELECT pg_advisory_unlock(hashtext('webhook-log-purge'))`);
      other.release();
    }
    expect(await purgeExpiredWebhookLog(t.services)).toEqual({ skipped: false, attempts: 1, deliveries: 1, orphaned: 0 });
  });
});
