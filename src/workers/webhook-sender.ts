import { Webhook } from 'standardwebhooks';
import type { Services } from '../services';
import { answeredOk, WebhookHttpClient } from '../adapters/webhooks/http-client';
import { secretBox } from '../commands/webhook-endpoint/secrets';
import { webhookEndpointDepsOf } from '../commands/webhook-endpoint/handler';
import { type ClaimedDelivery, claimDueDeliveries, type LeasedDelivery, releaseDeliveries } from '../projections/webhooks/deliveries';
import { endpointsById, type SendingEndpoint, signingSecrets } from '../projections/webhooks/queries';
import { type Answered, createAttemptRecorder, SECRET_UNSEALABLE, unsealableAttempt } from './webhook-attempt-recorder';
import { EndpointChanges, listenForEndpointSignals, readRunningPauses } from './webhook-endpoint-signals';
import { onDeliveriesQueued } from './webhook-fanout';
import { EndpointLanes, type HeldDelivery } from './webhook-lanes';
import { registerIntake } from './webhook-handoff';
import { sharePause } from './webhook-pauses';
import { RETRY_SCHEDULE_MS, retryAfterDelay } from './webhook-schedule';

// The sender (docs/webhooks.md): claims due deliveries with FOR UPDATE SKIP LOCKED, moving them a lease ahead
// (workers share them, none is sent twice in the normal case), or takes the fresh ones the fan-out of its process
// queued claimed for it (./webhook-handoff.ts), and posts them signed (Standard Webhooks) as they come, each
// endpoint in its own lane (./webhook-lanes.ts): a slow endpoint holds only its lane. Answers are recorded in
// batches (./webhook-attempt-recorder.ts). The deliveries of a process killed mid-delivery are due again when their
// lease ends.

export interface SenderOptions {
  /** the most deliveries one claim takes, and the size of a recorded batch */
  batchSize?: number;
  pollMs?: number;
  timeoutMs?: number;
  maxBodyBytes?: number;
  /** batches in hand at once for endpoints with room (default 2): batchSize x concurrency deliveries */
  concurrency?: number;
  /** requests in flight to one endpoint at most (default ENDPOINT_CONCURRENCY) */
  endpointConcurrency?: number;
  /** how long claimed deliveries stay this sender's before they are due again (a process that died) */
  leaseMs?: number;
  /** waits after each failed attempt (tests shorten it) */
  schedule?: readonly number[];
  random?: () => number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * How long a claimed batch is this sender's: then it is due again for any sender, which is how a process killed
 * mid-delivery loses nothing. Longer than a delivery can wait in hand: a claim adds at most a batch (200) to an
 * endpoint holding fewer than ENDPOINT_CONCURRENCY (128), so the last of them is posted after at most two
 * WEBHOOK_TIMEOUT_MS and answered by the third, 30 s. A delivery whose lease could end before its answer (within a
 * timeout) is not posted: it is released, due again for any sender.
 */
export const CLAIM_LEASE_MS = 60_000;
/** How long an endpoint has to answer (the whole request). */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** How much of an endpoint's answer is read (the attempt log keeps none of it; the rest is never read). */
export const WEBHOOK_MAX_RESPONSE_BYTES = 64 * 1024;
/** Requests in flight to one endpoint at most (the HTTP client itself has no cap per origin). */
export const ENDPOINT_CONCURRENCY = 128;
/**
 * The longest an endpoint's failed answer with Retry-After pauses its lane (a probe then; the answered delivery
 * itself waits what it asked, up to MAX_RETRY_AFTER_MS): within a claim's lease, so a waiting delivery is still posted.
 */
export const MAX_ENDPOINT_PAUSE_MS = 30_000;
/** A pause is shared again only when it runs this much longer than the one shared (its answers come in waves). */
const SHARE_PAUSE_STEP_MS = 1_000;
/** Full endpoints may hold this many times the budget of the others, in all (memory and sockets stay bounded). */
const FULL_ENDPOINTS_BUDGET_FACTOR = 4;
export function startWebhookSender(services: Services, options: SenderOptions = {}): { stop(): Promise<void> } {
  const batchSize = options.batchSize ?? 200;
  const leaseMs = options.leaseMs ?? CLAIM_LEASE_MS;
  const pollMs = options.pollMs ?? 500;
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  /** deliveries in hand for endpoints with room (and for fresh hand-offs waiting to be taken) */
  const budget = batchSize * (options.concurrency ?? 2);
  /** new work is taken once this much room is free (or nothing is in hand): claims and records stay batched */
  const lowWater = Math.max(1, Math.floor(batchSize / 4));
  const lanes = new EndpointLanes(options.endpointConcurrency ?? ENDPOINT_CONCURRENCY, (delta) => {
    services.metrics.webhookEndpointsFull.inc(delta);
    if (delta < 0) tableDue = true; // the claims passed its due deliveries over while it was full
  });
  const client = new WebhookHttpClient({
    timeoutMs,
    maxBodyBytes: options.maxBodyBytes ?? WEBHOOK_MAX_RESPONSE_BYTES,
    allowPrivate: services.config.webhooks.allowPrivateUrls,
    proxyUrl: services.config.webhooks.proxyUrl,
    logger: services.logger,
  });
  const box = secretBox(services.secrets.apiKeyPepper);
  /** each sealed secret's signer; null: this server cannot unseal it (another API_KEY_PEPPER, or damaged) */
  const signers = new Map<string, Webhook | null>();
  const signerOf = (sealed: string, endpointId: string): Webhook | null => {
    let w = signers.get(sealed);
    if (w === undefined) {
      if (signers.size > 10_000) signers.clear();
      try {
        w = new Webhook(box.open(sealed));
      } catch {
        w = null;
        services.logger.warn({ endpointId }, `webhook ${SECRET_UNSEALABLE}`);
      }
      signers.set(sealed, w);
    }
    return w;
  };
  /**
   * The `webhook-signature` of a request, or undefined when the endpoint's current secret cannot be unsealed. A
   * rotated-out secret that cannot be is left out: after a rotation the new secret signs at once.
   */
  const signatureOf = (d: ClaimedDelivery, ep: SendingEndpoint, sentAt: Date): string | undefined => {
    const [current, ...rotatedOut] = signingSecrets(ep, sentAt).map((s) => signerOf(s, ep.endpointId));
    if (!current) return undefined;
    return [current, ...rotatedOut].flatMap((w) => (w ? [w.sign(d.webhook_id, sentAt, d.payload)] : [])).join(' ');
  };
  let running = true;
  const recorder = createAttemptRecorder(services, {
    batchSize,
    schedule: options.schedule ?? RETRY_SCHEDULE_MS,
    random: options.random,
    deps: webhookEndpointDepsOf(services),
    inFlight: () => lanes.inFlight,
    onDisabled: (endpointId) => giveBackWaiting(endpointId),
    onRecorded: () => wake(), // room freed
  });

  // fresh deliveries the fan-out handed over, oldest first: taken while their endpoint has room
  const handed: Array<{ delivery: ClaimedDelivery; leaseUntil: number }> = [];
  let lastClaimAt = 0;
  /** the table may hold due deliveries now: queued unclaimed, left by a full claim, or of an endpoint no longer full */
  let tableDue = true;
  const unregister = registerIntake(services.pool, {
    capacity: () => (running ? Math.max(0, budget - handed.length) : 0),
    leaseUntil: (now) => new Date(now.getTime() + leaseMs),
    receive: (deliveries, leaseUntil) => {
      if (!running) return void release(deliveries.map((d) => ({ deliveryId: d.delivery_id, leaseUntil })));
      for (const delivery of deliveries) handed.push({ delivery, leaseUntil: leaseUntil.getTime() });
      wake();
    },
  });
  // An endpoint changed (URL, event types), disabled or deleted, or any may have (notifications missed while the
  // LISTEN connection was down): what waits in its lane was taken for the endpoint as it was; given back, it is due
  // again (claimed afresh with the endpoint as it is now), set aside or dropped as the change left it in the table
  // (a release touches only a row still under this sender's lease). Another sender's Retry-After pauses it here too.
  const changes = new EndpointChanges();
  const endpointSignals = listenForEndpointSignals(services.pool, services.logger, {
    changed: (endpointId) => {
      changes.changed(endpointId);
      giveBackWaiting(endpointId);
    },
    paused: ({ endpointId, ms }) => pausedElsewhere(endpointId, ms),
  });
  void endpointSignals.start();
  // deliveries in hand this sender will not post: due now for any sender, not at the end of their lease
  /** releases under way: stopping waits for them before the pool may close */
  const releasing = new Set<Promise<void>>();
  const release = (deliveries: LeasedDelivery[]) => {
    const done = releaseDeliveries(services.pool, deliveries, services.now())
      .catch((err) => services.logger.warn({ err }, 'could not release webhook deliveries'))
      .finally(() => releasing.delete(done));
    releasing.add(done);
    return done;
  };
  const leased = (d: ClaimedDelivery, leaseUntil: number): LeasedDelivery => ({ deliveryId: d.delivery_id, leaseUntil: new Date(leaseUntil) });
  /** released while the sender runs: due again, and claimed again at once (by this sender or another) */
  const giveBack = (deliveries: LeasedDelivery[]) =>
    release(deliveries).then(() => {
      tableDue = true;
      wake();
    });
  /** what waits in the endpoint's lane (every lane's: no id), given back */
  const giveBackWaiting = (endpointId?: string) => {
    const stale = lanes.takeWaiting(endpointId);
    if (stale.length > 0) void giveBack(stale.map((h) => leased(h.delivery, h.leaseUntil)));
  };
  /** deliveries refused at their lease's edge, released together (a lane's waiting deliveries reach it together) */
  let refused: LeasedDelivery[] = [];
  let releasingRefused: Promise<void> = Promise.resolve();
  const releaseRefused = (delivery: LeasedDelivery) => {
    if (refused.push(delivery) > 1) return;
    releasingRefused = releasingRefused
      .then(() => new Promise<void>((r) => setImmediate(r)))
      .then(() => giveBack(refused.splice(0)));
  };
  /**
   * Room for new deliveries: the budget less what endpoints with room hold and the answers not yet recorded (so a
   * slow database holds the sender back, as their leases run); the full endpoints' lanes count against a larger bound.
   */
  const room = () => {
    const unrecorded = recorder.unrecorded;
    return Math.min(budget - lanes.heldWithRoom() - unrecorded, FULL_ENDPOINTS_BUDGET_FACTOR * budget - lanes.held - unrecorded);
  };
  /**
   * Handed deliveries with less than half their lease left (they waited for a full endpoint, or for room) are not
   * taken into a lane, which may hold one for two timeouts: they are given back, due now for any sender (this one's
   * claims too, once their endpoint has room). Before 2026-11-27 (review 6) they were dropped, due only at their
   * lease's end. `handed` is oldest first, so the aged ones lead.
   */
  const giveBackAgedHanded = (now: Date) => {
    let n = 0;
    while (n < handed.length && handed[n].leaseUntil - now.getTime() < leaseMs / 2) n++;
    if (n > 0) void giveBack(handed.splice(0, n).map((h) => leased(h.delivery, h.leaseUntil)));
  };
  /**
   * Handed deliveries to take now, oldest first: up to `limit`, while their endpoint has room, with at least half
   * their lease left (giveBackAgedHanded). Those of full endpoints stay handed.
   */
  const takeHanded = (now: Date, limit: number): Array<{ delivery: ClaimedDelivery; leaseUntil: number }> => {
    giveBackAgedHanded(now);
    const taken: Array<{ delivery: ClaimedDelivery; leaseUntil: number }> = [];
    const kept: typeof handed = [];
    const takenBy = new Map<string, number>();
    let i = 0;
    for (; i < handed.length && taken.length < limit; i++) {
      const h = handed[i];
      const id = h.delivery.endpoint_id;
      const n = takenBy.get(id) ?? 0;
      if (lanes.heldBy(id) + n >= lanes.limitOf(id)) {
        kept.push(h);
        continue;
      }
      takenBy.set(id, n + 1);
      taken.push(h);
    }
    handed.splice(0, i, ...kept);
    return taken;
  };

  /** Takes new deliveries into the lanes, from the hand-off and the table; whether it took any. */
  const fill = async (): Promise<boolean> => {
    const now = services.now();
    const free = room();
    if (free <= 0 || (free < lowWater && lanes.held > 0)) {
      giveBackAgedHanded(now); // no room for long: the aged ones need not wait for it
      return false;
    }
    // the table is claimed when deliveries were queued unclaimed, and every pollMs (retries, other processes'
    // deliveries, deliveries whose sender died); not for each hand-off. Before the handed deliveries are taken, so
    // a failed claim leaves them handed.
    let claimed: ClaimedDelivery[] = [];
    let claimedAll = false;
    const handedWithRoom = handed.reduce((n, h) => (lanes.isFull(h.delivery.endpoint_id) ? n : n + 1), 0);
    const claimRoom = Math.min(batchSize, free - handedWithRoom);
    if (claimRoom > 0 && (tableDue || Date.now() - lastClaimAt >= pollMs)) {
      tableDue = false;
      lastClaimAt = Date.now();
      const caps = lanes.claimCaps(claimRoom);
      claimed = await claimDueDeliveries(services.pool, now, claimRoom, new Date(now.getTime() + leaseMs), lanes.fullEndpoints(), caps);
      claimedAll = claimed.length === claimRoom;
      // a narrowed endpoint given its whole cap may have hidden others' due deliveries behind its surplus: look again
      // (it is full now, so that claim passes it over)
      const claimedBy = new Map<string, number>();
      for (const d of claimed) claimedBy.set(d.endpoint_id, (claimedBy.get(d.endpoint_id) ?? 0) + 1);
      if (caps.endpointIds.some((id, i) => claimedBy.get(id) === caps.rooms[i])) tableDue = true;
    }
    const claimedUntil = now.getTime() + leaseMs;
    const taken = [...takeHanded(now, Math.max(0, free - claimed.length)), ...claimed.map((delivery) => ({ delivery, leaseUntil: claimedUntil }))];
    if (taken.length === 0) return false;
    const endpoints = await currentEndpoints([...new Set(taken.map((t) => t.delivery.endpoint_id))]);
    const touched = new Set<string>();
    const notPosted: LeasedDelivery[] = [];
    for (const { delivery, leaseUntil } of taken) {
      // a delivery of an endpoint disabled since it was queued is given back: set aside until it is enabled again
      const endpoint = endpoints.get(delivery.endpoint_id);
      if (!endpoint?.enabled) {
        notPosted.push(leased(delivery, leaseUntil));
        continue;
      }
      lanes.add({ delivery, endpoint, leaseUntil });
      touched.add(delivery.endpoint_id);
    }
    if (notPosted.length > 0) void release(notPosted);
    for (const id of touched) pump(id);
    // a full claim leaves more due, unless it filled its endpoints: their lanes bring the table back as they empty
    if (claimedAll && claimed.some((d) => !lanes.isFull(d.endpoint_id))) tableDue = true;
    return true;
  };

  /**
   * The endpoints as they are now: those whose change was heard while they were read (the read may hold them as
   * they were) are read again, so no delivery is posted to an endpoint as it was before a change this sender knew of.
   */
  const currentEndpoints = async (endpointIds: string[]): Promise<Map<string, SendingEndpoint>> => {
    const endpoints = new Map<string, SendingEndpoint>();
    for (let reading = endpointIds; reading.length > 0; ) {
      const mark = changes.mark();
      const read = await endpointsById(services.pool, reading);
      for (const id of reading) {
        const endpoint = read.get(id);
        if (endpoint) endpoints.set(id, endpoint);
        else endpoints.delete(id);
      }
      reading = reading.filter((id) => changes.since(mark, id));
    }
    return endpoints;
  };

  /** Starts the endpoint's waiting deliveries while it has requests to spare (and is not paused). */
  const pump = (endpointId: string) => {
    while (running) {
      const held = lanes.startNext(endpointId);
      if (!held) return;
      services.metrics.webhookRequestsInFlight.inc();
      void post(held);
    }
  };

  const post = async ({ delivery: d, endpoint: ep, leaseUntil }: HeldDelivery) => {
    let answer: Answered | undefined;
    try {
      const sentAt = services.now();
      // an answer could come after the lease's end, when another sender may have claimed it: due again now instead
      if (sentAt.getTime() + timeoutMs >= leaseUntil) return void releaseRefused(leased(d, leaseUntil));
      const signature = signatureOf(d, ep, sentAt);
      if (signature === undefined) {
        answer = { ...unsealableAttempt(d, ep, sentAt), leaseUntil }; // recorded as a failed attempt, on the schedule
        return;
      }
      const res = await client.post({
        url: ep.url,
        body: d.payload,
        headers: { 'webhook-id': d.webhook_id, 'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)), 'webhook-signature': signature },
      });
      const ok = answeredOk(res);
      const retryAfterMs = ok || res.retryAfter === null ? undefined : retryAfterDelay(res.retryAfter, sentAt);
      answer = { d, ep, res, ok, sentAt, retryAfterMs, leaseUntil };
    } catch (err) {
      services.logger.error({ err, deliveryId: d.delivery_id }, 'webhook delivery could not be posted');
    } finally {
      if (answer && !answer.notSent) {
        lanes.answered(d.endpoint_id, answer.ok); // its limit, before its lane takes the next
        if (answer.retryAfterMs) throttle(d.endpoint_id, answer.retryAfterMs);
      }
      lanes.finish(d.endpoint_id);
      services.metrics.webhookRequestsInFlight.dec();
      // once the request no longer counts in flight: the recorder records at once when it was the last
      if (answer) recorder.add(answer);
      pump(d.endpoint_id);
      wake();
    }
  };

  /**
   * Standard Webhooks: a failed answer's Retry-After throttles the endpoint; its lane starts nothing until this
   * endpoint's one timer resumes it (a later pause running longer moves the timer, never earlier). `sharedUntil`:
   * until when the other senders know it paused.
   */
  const pauses = new Map<string, { timer: NodeJS.Timeout; until: number; sharedUntil: number }>();
  const pauseFor = (endpointId: string, ms: number) => {
    const until = Date.now() + Math.min(ms, MAX_ENDPOINT_PAUSE_MS);
    const current = pauses.get(endpointId);
    if (current && current.until >= until) return current;
    if (current) clearTimeout(current.timer);
    lanes.pause(endpointId);
    const timer = setTimeout(() => {
      pauses.delete(endpointId);
      lanes.resume(endpointId);
      pump(endpointId);
    }, until - Date.now());
    const pause = { timer, until, sharedUntil: current?.sharedUntil ?? 0 };
    pauses.set(endpointId, pause);
    return pause;
  };
  /** this sender's answer asked for a pause: every sender's lane of the endpoint pauses, through Postgres */
  const throttle = (endpointId: string, ms: number) => {
    if (!running) return;
    if (!pauses.has(endpointId)) services.metrics.webhookEndpointPauses.inc();
    const pause = pauseFor(endpointId, ms);
    if (pause.until - pause.sharedUntil < SHARE_PAUSE_STEP_MS) return;
    pause.sharedUntil = pause.until;
    void sharePause(services.pool, { endpointId, ms: Math.min(ms, MAX_ENDPOINT_PAUSE_MS) })
      .catch((err) => services.logger.warn({ err, endpointId }, 'could not share a webhook endpoint pause with the other senders'));
  };
  /** another sender's answer asked for a pause (its notification, or a pause running when this sender's LISTEN began) */
  const pausedElsewhere = (endpointId: string, ms: number) => {
    if (!running) return;
    const pause = pauseFor(endpointId, ms);
    pause.sharedUntil = Math.max(pause.sharedUntil, Date.now() + Math.min(ms, MAX_ENDPOINT_PAUSE_MS));
  };

  // one filler takes new work: when woken (a hand-off, deliveries queued, an answer that freed room) or every pollMs
  let wakeFiller: (() => void) | undefined;
  let woken = false;
  const wake = () => {
    woken = true;
    wakeFiller?.();
  };
  const unsubscribe = onDeliveriesQueued(() => {
    tableDue = true;
    wake();
  });
  const filler = (async () => {
    // before the first claim: its LISTEN may not be up yet (it reads them again when it is)
    await readRunningPauses(services.pool, services.logger, ({ endpointId, ms }) => pausedElsewhere(endpointId, ms));
    let failures = 0;
    while (running) {
      woken = false;
      let took: boolean;
      try {
        took = await fill();
        failures = 0;
      } catch (err) {
        failures++;
        services.logger.error({ err }, 'webhook sender could not take new deliveries');
        await sleep(Math.min(5000, 50 * 2 ** Math.min(failures, 7)));
        continue;
      }
      if (took || woken || !running) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, pollMs);
        function done() {
          clearTimeout(timer);
          wakeFiller = undefined;
          resolve();
        }
        wakeFiller = done;
      });
    }
  })();

  const inFlightEnded = async () => {
    while (lanes.inFlight > 0) await sleep(10);
  };

  return {
    async stop() {
      running = false;
      await endpointSignals.stop();
      for (const { timer } of pauses.values()) clearTimeout(timer);
      unsubscribe();
      unregister();
      wake();
      await filler;
      const notPosted = [...lanes.takeWaiting(), ...handed.splice(0)].map((h) => leased(h.delivery, h.leaseUntil));
      await inFlightEnded();
      await recorder.flush();
      client.close();
      await releasingRefused;
      await release(notPosted);
      while (releasing.size > 0) await Promise.all(releasing);
    },
  };
}
