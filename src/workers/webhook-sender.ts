import { Webhook } from 'standardwebhooks';
import type { Services } from '../services';
import { WebhookHttpClient } from '../adapters/webhooks/http-client';
import { disableFailingEndpoint, type WebhookEndpointDeps } from '../commands/webhook-endpoint/handler';
import { secretBox } from '../commands/webhook-endpoint/secrets';
import { type AttemptRecord, type ClaimedDelivery, claimDueDeliveries, recordAttempts, releaseDeliveries, setDeliveriesAside } from '../projections/webhooks/deliveries';
import { endpointsById, type WebhookEndpointRow } from '../projections/webhooks/queries';
import type { WebhookAttemptOutcome } from '../shared/metrics';
import { onDeliveriesQueued } from './webhook-fanout';
import { registerIntake } from './webhook-handoff';
import { FAILING_DISABLE_AFTER_MS, nextRetryDelay, RETRY_SCHEDULE_MS } from './webhook-schedule';

// The sender (docs/webhooks.md): claims due deliveries with FOR UPDATE SKIP LOCKED, moving them a lease ahead
// (workers share them, none is sent twice in the normal case), or takes the fresh ones the fan-out of its process
// queued claimed for it (./webhook-handoff.ts), posts them signed (Standard Webhooks) concurrently, then records
// each attempt and the next retry in one statement. The deliveries of a process killed mid-delivery are due again
// when their lease ends.

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
  const countAttempt = (outcome: WebhookAttemptOutcome, latencyMs: number) => {
    services.metrics.webhookAttempts.labels(outcome).inc();
    services.metrics.webhookAttemptDuration.labels(outcome).observe(latencyMs / 1000);
  };
  let running = true;

  // fresh deliveries the fan-out handed over, oldest first: at most a batch for each round in flight
  const handed: Array<{ delivery: ClaimedDelivery; leaseUntil: number }> = [];
  const maxHanded = batchSize * concurrency;
  let lastClaimAt = 0;
  /** the table may hold due deliveries now: deliveries were queued unclaimed, or the last claim was full */
  let tableDue = true;
  const unregister = registerIntake(services.pool, {
    capacity: () => (running ? Math.max(0, maxHanded - handed.length) : 0),
    leaseUntil: (now) => new Date(now.getTime() + leaseMs),
    receive: (deliveries, leaseUntil) => {
      if (!running) return void release(deliveries.map((d) => d.delivery_id));
      for (const delivery of deliveries) handed.push({ delivery, leaseUntil: leaseUntil.getTime() });
      wakeOne();
    },
  });
  // handed deliveries this sender will not post: due now for any sender, not at the end of their lease
  const release = (deliveryIds: string[]) =>
    releaseDeliveries(services.pool, deliveryIds, services.now()).catch((err) => services.logger.warn({ err }, 'could not release handed webhook deliveries'));
  /** handed deliveries with at least half their lease left (the rest are due again at its end, for any sender) */
  const takeHanded = (now: Date, limit: number): ClaimedDelivery[] => {
    const taken = handed.splice(0, limit);
    return taken.filter((h) => h.leaseUntil - now.getTime() >= leaseMs / 2).map((h) => h.delivery);
  };

  const round = async (): Promise<number> => {
    const now = services.now();
    // the table is claimed when deliveries were queued unclaimed, and every pollMs (retries, other processes'
    // deliveries, deliveries whose sender died); not for each hand-off. Before the handed deliveries are taken, so
    // a failed claim leaves them handed.
    let claimed: ClaimedDelivery[] = [];
    const room = batchSize - Math.min(batchSize, handed.length);
    if (room > 0 && (tableDue || Date.now() - lastClaimAt >= pollMs)) {
      tableDue = false;
      lastClaimAt = Date.now();
      // the lease makes the rows due again if this process dies before recording them
      claimed = await claimDueDeliveries(services.pool, now, room, new Date(now.getTime() + leaseMs));
      if (claimed.length === room) tableDue = true;
    }
    const due = [...takeHanded(now, batchSize - claimed.length), ...claimed];
    const taken = due.length;
    if (taken === 0) return 0;
    const endpoints = await endpointsById(services.pool, [...new Set(due.map((r) => r.endpoint_id))]);
    // a delivery of an endpoint disabled since it was queued waits, set aside, until it is enabled again
    const results = await Promise.all(due.filter((d) => endpoints.get(d.endpoint_id)?.enabled).map(async (d) => {
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
    if (results.length === 0) return taken;
    const after = services.now();
    const disable: Array<{ endpoint: WebhookEndpointRow; reason: 'gone' | 'failing' }> = [];
    const rows = results.map(({ d, ep, res, sentAt }): AttemptRecord & { ok: boolean } => {
      const ok = res.statusCode !== null && res.statusCode >= 200 && res.statusCode < 300;
      countAttempt(ok ? 'success' : res.failure ?? 'http_error', res.latencyMs);
      const attempts = d.attempts + 1;
      const gone = res.statusCode === 410;
      const delay = ok || gone ? undefined : nextRetryDelay(schedule, attempts, options.random);
      const nextAt = delay === undefined ? null : new Date(after.getTime() + delay);
      if (gone) disable.push({ endpoint: ep, reason: 'gone' });
      return {
        deliveryId: d.delivery_id, endpointId: ep.endpointId, ok, attempts, status: ok ? 'succeeded' : nextAt ? 'pending' : 'failed', nextAt,
        attemptedAt: sentAt, statusCode: res.statusCode, latencyMs: res.latencyMs, error: ok ? null : res.error ?? `HTTP ${res.statusCode}`,
      };
    });
    // each endpoint's failure streak: cleared by any success (only written when one runs), started by its first failure
    const okEndpoints = new Set(rows.filter((r) => r.ok).map((r) => r.endpointId));
    const recovered = [...okEndpoints].filter((id) => endpoints.get(id)!.failingSince !== null);
    const failing = [...new Set(rows.filter((r) => !r.ok).map((r) => r.endpointId))].filter((id) => !okEndpoints.has(id));
    const stale = await recordAttempts(services.pool, rows, { recovered, failing }, after, new Date(after.getTime() - FAILING_DISABLE_AFTER_MS));
    services.metrics.webhookDeliveriesFailed.inc(rows.filter((r) => r.status === 'failed').length);
    for (const id of stale) disable.push({ endpoint: endpoints.get(id)!, reason: 'failing' });
    for (const { endpoint, reason } of disable) {
      if (await disableFailingEndpoint(deps, endpoint.companyId, endpoint.endpointId, reason)) services.metrics.webhookEndpointsDisabled.labels(reason).inc();
      await setDeliveriesAside(services.pool, endpoint.endpointId);
      services.logger.warn({ endpointId: endpoint.endpointId, reason }, 'webhook endpoint disabled');
    }
    return taken;
  };

  // several rounds in flight, so one round's HTTP calls overlap another's database work (claims never overlap)
  const wakers = new Set<() => void>();
  const wakeOne = () => [...wakers][0]?.();
  const unsubscribe = onDeliveriesQueued(() => {
    tableDue = true;
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
      if (taken >= batchSize || handed.length > 0 || !running) continue;
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
      unregister();
      for (const w of [...wakers]) w();
      await loops;
      client.close();
      await release(handed.splice(0).map((h) => h.delivery.delivery_id));
    },
  };
}
