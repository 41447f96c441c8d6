import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';

// The webhook outbox (migration 0007, schema `webhooks`): one delivery per (webhook event, endpoint) and every
// attempt. Written by the fan-out and the sender (src/workers/webhook-*.ts); read and re-queued by the API.

type Db = Pool | PoolClient;

export interface NewDelivery {
  endpointId: string;
  companyId: number;
  webhookId: string;
  eventType: string;
  payload: string;
}

/** Queues deliveries due now; a (endpoint, webhook id) queued before is left alone (at least once, not twice). */
export async function queueDeliveries(db: Db, deliveries: readonly NewDelivery[], now: Date): Promise<number> {
  if (deliveries.length === 0) return 0;
  const r = await db.query(
    `INSERT INTO webhooks.deliveries (delivery_id, endpoint_id, company_id, webhook_id, event_type, payload, status, next_attempt_at, created_at)
     SELECT d, e, c, w, t, p, 'pending', $7, $7
       FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[]) AS x(d, e, c, w, t, p)
     ON CONFLICT (endpoint_id, webhook_id) DO NOTHING`,
    [deliveries.map(() => randomUUID()), deliveries.map((d) => d.endpointId), deliveries.map((d) => d.companyId),
      deliveries.map((d) => d.webhookId), deliveries.map((d) => d.eventType), deliveries.map((d) => d.payload), now],
  );
  return r.rowCount ?? 0;
}

export interface DeliveryAttemptView {
  attemptId: number;
  deliveryId: string;
  webhookId: string;
  eventType: string;
  attemptedAt: Date;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  nextRetryAt: Date | null;
  deliveryStatus: string;
}

/** An endpoint's attempts, newest first. */
export async function listDeliveryAttempts(db: Db, endpointId: string, page: { limit: number; offset: number }): Promise<{ count: number; rows: DeliveryAttemptView[] }> {
  const count = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhooks.attempts WHERE endpoint_id = $1', [endpointId]);
  const { rows } = await db.query(
    `SELECT a.attempt_id, a.delivery_id, d.webhook_id, d.event_type, a.attempted_at, a.status_code, a.latency_ms, a.error, a.next_retry_at, d.status
       FROM webhooks.attempts a JOIN webhooks.deliveries d ON d.delivery_id = a.delivery_id
      WHERE a.endpoint_id = $1 ORDER BY a.attempt_id DESC LIMIT $2 OFFSET $3`,
    [endpointId, page.limit, page.offset],
  );
  return {
    count: count.rows[0].n,
    rows: rows.map((r) => ({
      attemptId: Number(r.attempt_id), deliveryId: r.delivery_id, webhookId: r.webhook_id, eventType: r.event_type, attemptedAt: r.attempted_at,
      statusCode: r.status_code, latencyMs: r.latency_ms, error: r.error, nextRetryAt: r.next_retry_at, deliveryStatus: r.status,
    })),
  };
}

/** Queues a delivery of the endpoint again, due now (a failed one starts a fresh schedule). False: no such delivery. */
export async function requeueDelivery(db: Db, endpointId: string, deliveryId: string, now: Date): Promise<{ webhookId: string } | undefined> {
  const { rows } = await db.query(
    `UPDATE webhooks.deliveries SET status = 'pending', attempts = 0, next_attempt_at = $3, completed_at = NULL
      WHERE endpoint_id = $1 AND delivery_id = $2 RETURNING webhook_id`,
    [endpointId, deliveryId, now],
  );
  return rows[0] ? { webhookId: rows[0].webhook_id } : undefined;
}

/** Drops the queued deliveries of a deleted endpoint. */
export async function dropPendingDeliveries(db: Db, endpointId: string, now: Date): Promise<void> {
  await db.query(`UPDATE webhooks.deliveries SET status = 'dropped', next_attempt_at = NULL, completed_at = $2 WHERE endpoint_id = $1 AND status = 'pending'`, [endpointId, now]);
}
