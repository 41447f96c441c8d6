import type { WebhookResponse } from '../adapters/webhooks/http-client';
import { disableFailingEndpoint, type WebhookEndpointDeps } from '../commands/webhook-endpoint/handler';
import { type AttemptRecord, type ClaimedDelivery, recordAttempts, setDeliveriesAside } from '../projections/webhooks/deliveries';
import type { SendingEndpoint } from '../projections/webhooks/queries';
import type { Services } from '../services';
import { FAILING_DISABLE_AFTER_MS, retryDelayAfterFailure } from './webhook-schedule';

// The sender's answers, recorded (docs/webhooks.md, "Delivery"): a batch at a time, one batch after another, at once
// when nothing else is in flight or a batch has gathered, else after RECORD_LINGER_MS. Each batch is one statement:
// the attempts, each delivery's next retry or end, the endpoints' failure streaks; then the endpoints to disable
// (410, or failing for 5 days). A batch that fails to record is due again when its deliveries' lease ends.

/** How long answers wait to be recorded together while requests are still in flight. */
const RECORD_LINGER_MS = 20;

export interface Answered {
  d: ClaimedDelivery;
  ep: SendingEndpoint;
  res: WebhookResponse;
  /** a 2xx (answeredOk), judged once when the answer arrived */
  ok: boolean;
  sentAt: Date;
  /** the wait a failed answer's Retry-After asked for (at most MAX_RETRY_AFTER_MS), if it carried a valid one */
  retryAfterMs?: number;
  /** no request was made, and why: a failed attempt all the same (`res` empty but its `error`) */
  notSent?: 'secret_unsealable';
  /** the end of the claim's lease the request was made under (ms since the epoch) */
  leaseUntil?: number;
}

export const SECRET_UNSEALABLE = 'endpoint secret cannot be unsealed (API_KEY_PEPPER changed?)';

/** The attempt of a delivery whose endpoint's current signing secret this server cannot unseal: failed, no request made. */
export const unsealableAttempt = (d: ClaimedDelivery, ep: SendingEndpoint, sentAt: Date): Answered => ({
  d, ep, sentAt, ok: false, notSent: 'secret_unsealable',
  res: { statusCode: null, failure: null, latencyMs: 0, error: SECRET_UNSEALABLE, body: '', retryAfter: null },
});

export interface AttemptRecorderOptions {
  batchSize: number;
  /** waits after each failed attempt */
  schedule: readonly number[];
  random?: () => number;
  deps: WebhookEndpointDeps;
  /** the sender's requests in flight now (more answers are coming) */
  inFlight: () => number;
  /** an endpoint was disabled: its deliveries still waiting in the sender are given back (set aside with the rest) */
  onDisabled: (endpointId: string) => void;
  /** a batch was recorded (room freed) */
  onRecorded: () => void;
}

export interface AttemptRecorder {
  add(answer: Answered): void;
  /** answers not yet recorded, the batch being recorded included */
  readonly unrecorded: number;
  /** records everything answered so far */
  flush(): Promise<void>;
}

export function createAttemptRecorder(services: Services, options: AttemptRecorderOptions): AttemptRecorder {
  const { batchSize } = options;
  const answered: Answered[] = [];
  let recordingCount = 0;
  let recording: Promise<void> | undefined;
  let linger: NodeJS.Timeout | undefined;

  /**
   * Records a batch in one statement; then disables the endpoints that asked for it (410, or failing for too long).
   * A failed answer decides its delivery only while the claim it was sent under is still the delivery's: a sender
   * paused (SIGSTOP, a VM freeze) with its request at the endpoint, resumed after its lease, found the delivery
   * another sender's, its request under way, and recording the failure made it due again at its retry (5 s), posted
   * again beside that request (review 16b). The claim is judged inside the record's statement, on the rows it locks
   * (recordAttempts), not by the clock (review 16f: a sender never paused, its answer written just after the lease's
   * end by the linger, is still the claim's owner) nor by a check before the statement (a pause between the two let
   * another claim in). Such a failure is logged all the same: the endpoint received that request. A success is
   * recorded (the event arrived; no other post is needed).
   */
  const record = async (batch: Answered[]) => {
    const after = services.now();
    const disable: Array<{ endpoint: SendingEndpoint; reason: 'gone' | 'failing' }> = [];
    const endpoints = new Map(batch.map((a) => [a.ep.endpointId, a.ep]));
    const rows = batch.map(({ d, ep, res, ok, sentAt, retryAfterMs, notSent, leaseUntil }): AttemptRecord & { ok: boolean } => {
      const outcome = ok ? 'success' : notSent ?? res.failure ?? 'http_error';
      services.metrics.webhookAttempts.labels(outcome).inc();
      services.metrics.webhookAttemptDuration.labels(outcome).observe(res.latencyMs / 1000);
      const attempts = d.attempts + 1;
      const gone = res.statusCode === 410;
      const delay = ok || gone ? undefined : retryDelayAfterFailure(options.schedule, attempts, retryAfterMs, options.random);
      const nextAt = delay === undefined ? null : new Date(after.getTime() + delay);
      if (gone && !disable.some((x) => x.endpoint.endpointId === ep.endpointId)) disable.push({ endpoint: ep, reason: 'gone' });
      return {
        deliveryId: d.delivery_id, endpointId: ep.endpointId, ok, attempts, status: ok ? 'succeeded' : nextAt ? 'pending' : 'failed', nextAt,
        attemptedAt: sentAt, statusCode: res.statusCode, latencyMs: res.latencyMs, error: ok ? null : res.error ?? answerError(res),
        leaseUntil: leaseUntil === undefined ? null : new Date(leaseUntil),
      };
    });
    // each endpoint's failure streak: cleared by any success (only written when one runs), started by its first failure
    const okEndpoints = new Set(rows.filter((r) => r.ok).map((r) => r.endpointId));
    const recovered = [...okEndpoints].filter((id) => endpoints.get(id)!.failingSince !== null);
    const failing = [...new Set(rows.filter((r) => !r.ok).map((r) => r.endpointId))].filter((id) => !okEndpoints.has(id));
    const { stale, failed, taken } = await recordAttempts(services.pool, rows, { recovered, failing }, after, new Date(after.getTime() - FAILING_DISABLE_AFTER_MS));
    if (taken.length > 0) {
      services.logger.warn({ deliveries: taken },
        'webhook attempts failed under a claim another sender has replaced since (this sender paused past its lease): logged, the deliveries left to that sender');
    }
    // as recorded: an attempt that ended its schedule while a retry was asked leaves the delivery pending
    services.metrics.webhookDeliveriesFailed.inc(failed);
    for (const id of stale) disable.push({ endpoint: endpoints.get(id)!, reason: 'failing' });
    await disableEndpoints(disable);
  };

  const disableEndpoints = async (disable: Array<{ endpoint: SendingEndpoint; reason: 'gone' | 'failing' }>) => {
    for (const { endpoint, reason } of disable) {
      if (await disableFailingEndpoint(options.deps, endpoint.companyId, endpoint.endpointId, reason)) services.metrics.webhookEndpointsDisabled.labels(reason).inc();
      await setDeliveriesAside(services.pool, endpoint.endpointId);
      options.onDisabled(endpoint.endpointId);
      services.logger.warn({ endpointId: endpoint.endpointId, reason }, 'webhook endpoint disabled');
    }
  };

  const schedule = () => {
    if (recording || answered.length === 0) return;
    if (answered.length >= batchSize || options.inFlight() === 0) return void recordNow();
    linger ??= setTimeout(recordNow, RECORD_LINGER_MS);
  };
  const recordNow = () => {
    clearTimeout(linger);
    linger = undefined;
    if (recording || answered.length === 0) return;
    recording = (async () => {
      while (answered.length > 0) {
        const batch = answered.splice(0, batchSize);
        recordingCount = batch.length;
        try {
          await record(batch);
        } catch (err) {
          services.logger.error({ err, deliveries: batch.length }, 'webhook attempts could not be recorded; the deliveries are due again when their lease ends');
          await new Promise((r) => setTimeout(r, 100));
        } finally {
          recordingCount = 0;
        }
        if (answered.length < batchSize && options.inFlight() > 0) break;
      }
    })().finally(() => {
      recording = undefined;
      schedule();
      options.onRecorded();
    });
  };

  return {
    add(answer) {
      answered.push(answer);
      schedule();
    },
    get unrecorded() {
      return answered.length + recordingCount;
    },
    async flush() {
      while (recording || answered.length > 0) {
        recordNow();
        await recording;
      }
    },
  };
}

/** What the attempt log says of a non-2xx answer: its status, and its `Retry-After` as sent (cut at 64 characters). */
export const answerError = (res: WebhookResponse): string =>
  res.retryAfter === null ? `HTTP ${res.statusCode}` : `HTTP ${res.statusCode}, Retry-After: ${res.retryAfter.slice(0, 64)}`;
