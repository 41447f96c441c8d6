import { Webhook } from 'standardwebhooks';
import type { Services } from '../services';
import { WebhookHttpClient } from '../adapters/webhooks/http-client';
import { disableFailingEndpoint, type WebhookEndpointDeps } from '../commands/webhook-endpoint/handler';
import { secretBox } from '../commands/webhook-endpoint/secrets';
import { claimDueDeliveries, setDeliveriesAside } from '../projections/webhooks/deliveries';
import { endpointsById, type WebhookEndpointRow } from '../projections/webhooks/queries';
import { withTransaction } from '../shared/tx';
import { onDeliveriesQueued } from './webhook-fanout';
import { FAILING_DISABLE_AFTER_MS, nextRetryDelay, RETRY_SCHEDULE_MS } from './webhook-schedule';

// The sender (docs/webhooks.md): claims due deliveries with FOR UPDATE SKIP LOCKED, moving them a lease ahead
// (workers share them, none is sent twice in the normal case), posts them signed (Standard Webhooks) concurrently,
// then records each attempt and the next retry in one transaction. The deliveries of a process killed
// mid-delivery are due again when their lease ends.

export interface SenderOptions {
  batchSize?: number;
  pollMs?: number;
  timeoutMs?: number;
  maxBodyBytes?: number;
  /** rounds in flight at once (default 2) */
  concurrency?: number;
  /** how long claimed deliveries stay this sender's before they are due again (a process that died) */
  leaseMs?: number;
  /** waits after each failed attempt (tests shorten it) */
  schedule?: readonly number[];
  random?: () => number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * How long a claimed batch is this sender's: then it is due again for any sender, which is how a process killed
 * mid-delivery loses nothing. Longer than a batch can take: two rounds of 200 deliveries to one endpoint, 128
 * connections at a time, each at most WEBHOOK_TIMEOUT_MS, is 40 s.
 */
export const CLAIM_LEASE_MS = 60_000;
/** How long an endpoint has to answer (the whole request). */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** How much of an endpoint's answer is read (the attempt log keeps none of it; the rest is never read). */
export const WEBHOOK_MAX_RESPONSE_BYTES = 64 * 1024;

export function startWebhookSender(services: Services, options: SenderOptions = {}): { stop(): Promise<void> } {
  const batchSize = options.batchSize ?? 200;
  const leaseMs = options.leaseMs ?? CLAIM_LEASE_MS;
  const concurrency = options.concurrency ?? 2;
  const pollMs = options.pollMs ?? 500;
  const client = new WebhookHttpClient({
    timeoutMs: options.timeoutMs ?? WEBHOOK_TIMEOUT_MS,
    maxBodyBytes: options.maxBodyBytes ?? WEBHOOK_MAX_RESPONSE_BYTES,
    allowPrivate: services.config.webhooks.allowPrivateUrls,
  });
  const box = secretBox(services.secrets.apiKeyPepper);
  const signers = new Map<string, Webhook>();
  const signerOf = (sealed: string) => {
    let w = signers.get(sealed);
    if (!w) {
      if (signers.size > 10_000) signers.clear();
      w = new Webhook(box.open(sealed));
      signers.set(sealed, w);
    }
    return w;
  };
  const deps: WebhookEndpointDeps = { store: services.store, waiter: services.runner, box, now: services.now };
  const schedule = options.schedule ?? RETRY_SCHEDULE_MS;
  let running = true;

  const round = async (): Promise<number> => {
    const now = services.now();
    // the lease makes the rows due again if this process dies before recording them
    const due = await claimDueDeliveries(services.pool, now, batchSize, new Date(now.getTime() + leaseMs));
    const taken = due.length;
    if (taken === 0) return 0;
    const endpoints = await endpointsById(services.pool, [...new Set(due.map((r) => r.endpoint_id))]);
    const results = await Promise.all(due.filter((d) => endpoints.has(d.endpoint_id)).map(async (d) => {
      const ep = endpoints.get(d.endpoint_id)!;
      const sentAt = services.now();
      const secrets = [ep.secret, ...(ep.previousSecret && ep.previousValidUntil && ep.previousValidUntil > sentAt ? [ep.previousSecret] : [])];
      const signature = secrets.map((s) => signerOf(s).sign(d.webhook_id, sentAt, d.payload)).join(' ');
      const res = await client.post({
        url: ep.url,
        body: d.payload,
        headers: { 'webhook-id': d.webhook_id, 'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)), 'webhook-signature': signature },
      });
      return { d, ep, res, sentAt };
    }));
    const after = services.now();
    const disable: Array<{ endpoint: WebhookEndpointRow; reason: 'gone' | 'failing' }> = [];
    const rows = results.map(({ d, ep, res, sentAt }) => {
      const ok = res.statusCode !== null && res.statusCode >= 200 && res.statusCode < 300;
      const attempts = d.attempts + 1;
      const gone = res.statusCode === 410;
      const delay = ok || gone ? undefined : nextRetryDelay(schedule, attempts, options.random);
      const nextAt = delay === undefined ? null : new Date(after.getTime() + delay);
      const status = ok ? 'succeeded' : nextAt ? 'pending' : 'failed';
      const error = ok ? null : res.error ?? `HTTP ${res.statusCode}`;
      if (gone) disable.push({ endpoint: ep, reason: 'gone' });
      return { id: d.delivery_id, endpointId: ep.endpointId, ok, attempts, status, nextAt, sentAt, code: res.statusCode, latency: res.latencyMs, error };
    });
    await withTransaction(services.pool, async (db) => {
      await db.query(
        `INSERT INTO webhooks.attempts (delivery_id, endpoint_id, attempted_at, status_code, latency_ms, error, next_retry_at)
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::int[], $5::int[], $6::text[], $7::timestamptz[])`,
        [rows.map((r) => r.id), rows.map((r) => r.endpointId), rows.map((r) => r.sentAt), rows.map((r) => r.code), rows.map((r) => r.latency),
          rows.map((r) => r.error), rows.map((r) => r.nextAt)],
      );
      // a delivery dropped meanwhile (its endpoint deleted) stays dropped
      await db.query(
        `UPDATE webhooks.deliveries d SET status = x.s, attempts = x.a, next_attempt_at = x.n, completed_at = CASE WHEN x.s = 'pending' THEN NULL ELSE $5::timestamptz END
           FROM unnest($1::uuid[], $2::text[], $3::int[], $4::timestamptz[]) AS x(id, s, a, n) WHERE d.delivery_id = x.id AND d.status = 'pending'`,
        [rows.map((r) => r.id), rows.map((r) => r.status), rows.map((r) => r.attempts), rows.map((r) => r.nextAt), after],
      );
      // each endpoint's failure streak: cleared by any success, started by its first failure
      const okEndpoints = [...new Set(rows.filter((r) => r.ok).map((r) => r.endpointId))];
      const failedEndpoints = [...new Set(rows.filter((r) => !r.ok).map((r) => r.endpointId))].filter((id) => !okEndpoints.includes(id));
      if (okEndpoints.length > 0) {
        await db.query(
          `INSERT INTO webhooks.endpoint_health (endpoint_id, failing_since) SELECT id, NULL FROM unnest($1::text[]) id
           ON CONFLICT (endpoint_id) DO UPDATE SET failing_since = NULL WHERE webhooks.endpoint_health.failing_since IS NOT NULL`, [okEndpoints]);
      }
      if (failedEndpoints.length > 0) {
        const failing = await db.query<{ endpoint_id: string; stale: boolean }>(
          `INSERT INTO webhooks.endpoint_health (endpoint_id, failing_since) SELECT id, $2::timestamptz FROM unnest($1::text[]) id
           ON CONFLICT (endpoint_id) DO UPDATE SET failing_since = COALESCE(webhooks.endpoint_health.failing_since, EXCLUDED.failing_since)
           RETURNING endpoint_id, failing_since <= $3::timestamptz AS stale`,
          [failedEndpoints, after, new Date(after.getTime() - FAILING_DISABLE_AFTER_MS)],
        );
        for (const r of failing.rows) if (r.stale) disable.push({ endpoint: endpoints.get(r.endpoint_id)!, reason: 'failing' });
      }
    });
    for (const { endpoint, reason } of disable) {
      await disableFailingEndpoint(deps, endpoint.companyId, endpoint.endpointId, reason);
      await setDeliveriesAside(services.pool, endpoint.endpointId);
      services.logger.warn({ endpointId: endpoint.endpointId, reason }, 'webhook endpoint disabled');
    }
    return taken;
  };

  // several rounds in flight, so one round's HTTP calls overlap another's database work (claims never overlap)
  const wakers = new Set<() => void>();
  const unsubscribe = onDeliveriesQueued(() => {
    for (const w of [...wakers]) w();
  });
  const loop = async () => {
    let failures = 0;
    while (running) {
      let taken = 0;
      try {
        taken = await round();
        failures = 0;
      } catch (err) {
        failures++;
        services.logger.error({ err }, 'webhook sender round failed');
        await sleep(Math.min(5000, 50 * 2 ** Math.min(failures, 7)));
        continue;
      }
      if (taken >= batchSize || !running) continue;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          wakers.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, pollMs);
        wakers.add(wake);
      });
    }
  };
  const loops = Promise.all(Array.from({ length: concurrency }, loop));

  return {
    async stop() {
      running = false;
      unsubscribe();
      for (const w of [...wakers]) w();
      await loops;
      client.close();
    },
  };
}
