// The bulk-send dispatcher (ARCHITECTURE section 8, docs/bulk.md "Dispatcher"). Runs in `serve` and `worker`;
// any number of processes may run one.
//
// - Work comes from bulk_work.jobs / bulk_work.recipients (src/commands/bulk/work.ts). A process serves each
//   sending number with one task. Numbers with a spaced tier are served by one dispatcher at a time (a number
//   lease), so their pacing holds across processes; TIER_UNLIMITED numbers are shared by every dispatcher.
// - A window of recipients is claimed with FOR UPDATE SKIP LOCKED and durably marked in_flight (dispatcher id,
//   lease) before the provider is called: concurrent dispatchers never get the same recipient, and a
//   recipient found in flight after a crash is resolved as failed "interrupted, outcome unknown" by the lease
//   sweep (src/workers/bulk-lease-cron.ts), never sent again.
// - Sends start at the tier's spacing (TIER_50 1.2 s ... TIER_UNLIMITED none), at most `concurrency` in flight.
//   The spacing holds from one task of a number to the next: this process keeps each number's next send slot, and
//   a released number lease stays on the row until that slot (for a dispatcher of another process).
// - Quota: unique recipients per number in a rolling 24 h; when it is used up the bulk is paused
//   (BulkSendPaused, status stays PROCESSING) until the window frees room (BulkSendResumed). Recipients already
//   in the window are sent without using quota.
// - Retryable provider errors go back to pending with exponential backoff (a timeout is not retried: the
//   message may have been accepted); others fail the recipient with the provider's code and message.
// - Outcomes: work rows and their outcome batch in one statement, then one BulkRecipientsDispatched /
//   BulkRecipientsRejected event per batch (window × chunk), then the batch is deleted; a crash in between
//   leaves the batch to be appended again under the same event id. When nothing is left the bulk finishes
//   COMPLETED / PARTIAL / FAILED.
// - A cancel stops claims (the job's flag) and reaches the window in hand: at once in this process (signals.ts), by
//   a notification from any other (BULK_CANCEL_CHANNEL), re-checked when the listening connection is back.
// The clock and sleep are injectable (tests use a fake clock: pacing without waiting).
//
// Split along its jobs (issue #17); this file keeps the loop: polling, a task per number, serving its jobs.
// - bulk-dispatcher-context.ts: options, the context the helpers run in, the kill error
// - bulk-pacer.ts: pacing of a number's sends
// - bulk-window-claim.ts: window size and claiming a window (with the quota)
// - bulk-window-sender.ts: sending a claimed window, each answer an outcome
// - bulk-outcome-recorder.ts: recording a window's outcomes and their events
// - bulk-job-transitions.ts: start, pause, resume and finish of a job
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { BULK_CANCEL_CHANNEL, bulkSignals } from '../commands/bulk/signals';
import {
  acquireNumberLease,
  cancelRequestedAmong,
  getJob,
  heartbeat,
  type JobRow,
  jobProgress,
  materializeChunks,
  nextJobOfNumber,
  numbersWithWork,
  releaseNumberLeaseAtSlot,
} from '../commands/bulk/work';
import type { MessagingProvider } from '../ports/provider';
import { findNumberById, type NumberRecord, recommendedSpacingMs } from '../projections/accounts/queries';
import type { Services } from '../services';
import { PgListener } from '../shared/pg-listener';
import {
  type BulkDispatcherOptions,
  type DispatcherContext,
  DispatcherKilledError,
  type DispatcherSettings,
  realSleep,
} from './bulk-dispatcher-context';
import { finishJob, pauseJob, resumeJob, startJob } from './bulk-job-transitions';
import { recordOutcomes } from './bulk-outcome-recorder';
import { Pacer } from './bulk-pacer';
import { claimWindow, windowSize } from './bulk-window-claim';
import { sendWindow } from './bulk-window-sender';

export type { BulkDispatcherOptions } from './bulk-dispatcher-context';
export { Pacer } from './bulk-pacer';

type JobResult = { didWork: boolean; next: 'next-job' | 'stop' };

export class BulkDispatcher {
  readonly id: string;
  private running = false;
  private dead = false;
  private loopPromise: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private kicked = false;
  private readonly numberTasks = new Map<number, Promise<boolean>>();
  private readonly cancelled = new Set<string>();
  private readonly provider: MessagingProvider;
  private readonly clock: () => Date;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly o: DispatcherSettings;
  private readonly ctx: DispatcherContext;
  private readonly onKick = () => this.kick();
  private readonly onCancel = (bulkId: string) => {
    if (this.cancelled.size > 10_000) this.cancelled.clear();
    if (this.serving.has(bulkId) && !this.cancelled.has(bulkId)) {
      this.services.logger.info({ bulkId, dispatcher: this.id }, 'bulk dispatcher: bulk cancelled, the rest of its window is not sent');
    }
    this.cancelled.add(bulkId);
  };
  /** bulks this dispatcher is serving (a window in hand, or about to claim one) */
  private readonly serving = new Set<string>();
  /** cancels made in other processes; while not listening one may be missed, so the served bulks are re-checked */
  private readonly cancels: PgListener;
  private lastBeat = new Map<string, number>();
  /** each number's next send slot (ms) when its last task ended, so the next task keeps the tier's spacing */
  private readonly nextSlots = new Map<number, number>();

  constructor(
    private readonly services: Services,
    options: BulkDispatcherOptions = {},
  ) {
    this.id = options.id ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.provider = options.provider ?? services.provider;
    this.clock = options.now ?? services.now;
    this.sleep = options.sleep ?? realSleep;
    this.o = {
      pollMs: options.pollMs ?? 500,
      unlimitedWindow: options.unlimitedWindow ?? 200,
      windowMs: options.windowMs ?? 2000,
      concurrency: options.concurrency ?? 16,
      recipientLeaseMs: options.recipientLeaseMs ?? 5 * 60_000,
      numberLeaseMs: options.numberLeaseMs ?? 30_000,
      maxAttempts: options.maxAttempts ?? 4,
      retryBaseMs: options.retryBaseMs ?? 2000,
      maxRetryDelayMs: options.maxRetryDelayMs ?? 60_000,
      throughputBackoffMs: options.throughputBackoffMs ?? 1000,
      maxNumbers: options.maxNumbers ?? 8,
      materializeChunks: options.materializeChunks ?? 5,
    };
    this.ctx = {
      services,
      id: this.id,
      provider: this.provider,
      o: this.o,
      now: () => this.now(),
      guard: () => this.guard(),
      stopping: (bulkId) => this.stopping(bulkId),
    };
    this.cancels = new PgListener(services.pool, [BULK_CANCEL_CHANNEL], {
      onNotify: (_channel, bulkId) => {
        if (bulkId) this.onCancel(bulkId);
      },
      onReset: () => void this.recheckCancels(),
    });
  }

  start(): void {
    if (this.running || this.dead) return;
    this.running = true;
    bulkSignals.on('kick', this.onKick);
    bulkSignals.on('cancel', this.onCancel);
    void this.cancels.start();
    this.loopPromise = this.loop();
  }

  /** Graceful: no new claims, the rest of a held window goes back to pending, in-flight sends are recorded. */
  async stop(): Promise<void> {
    if (this.dead) return; // a killed dispatcher's calls may never return
    this.running = false;
    const unlistened = this.detach();
    this.wake?.();
    await this.loopPromise;
    await Promise.allSettled([...this.numberTasks.values(), unlistened]);
  }

  /** Simulates a crash (tests): from now on this dispatcher writes nothing; its rows and leases stay behind. */
  kill(): void {
    this.dead = true;
    this.running = false;
    void this.detach();
    this.wake?.();
  }

  kick(): void {
    this.kicked = true;
    this.wake?.();
  }

  /** Resolves once the listening connection is back in the pool. */
  private detach(): Promise<void> {
    bulkSignals.off('kick', this.onKick);
    bulkSignals.off('cancel', this.onCancel);
    return this.cancels.stop(); // stopping() holds from here on: no window is sent further anyway
  }

  /** Cancels of the served bulks that a lost listening connection may have missed. */
  private async recheckCancels(): Promise<void> {
    if (!this.running || this.serving.size === 0) return;
    try {
      for (const bulkId of await cancelRequestedAmong(this.services.pool, [...this.serving])) this.onCancel(bulkId);
    } catch (err) {
      this.services.logger.warn({ err, dispatcher: this.id }, 'bulk dispatcher: could not re-check cancels');
    }
  }

  private guard(): void {
    if (this.dead) throw new DispatcherKilledError('dispatcher killed');
  }

  private now(): Date {
    return this.clock();
  }

  private async loop(): Promise<void> {
    while (this.running) {
      this.kicked = false;
      try {
        await this.tick();
      } catch (err) {
        if (err instanceof DispatcherKilledError) return;
        this.services.logger.error({ err, dispatcher: this.id }, 'bulk dispatcher: poll failed');
      }
      if (!this.running) break;
      if (this.kicked) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.o.pollMs);
        this.wake = done;
        function done() {
          clearTimeout(timer);
          resolve();
        }
      });
      this.wake = undefined;
    }
  }

  /** One poll: starts a task for every number with work that has none yet. */
  async tick(): Promise<void> {
    this.guard();
    const numbers = await numbersWithWork(this.services.pool, this.now());
    for (const numberId of numbers) {
      if (!this.running) break;
      if (this.numberTasks.has(numberId)) continue;
      if (this.numberTasks.size >= this.o.maxNumbers) break;
      const task = this.serveNumber(numberId)
        .catch((err) => {
          if (!(err instanceof DispatcherKilledError)) {
            this.services.logger.error({ err, dispatcher: this.id, numberId }, 'bulk dispatcher: serving a number failed');
          }
          return false;
        })
        .then((didWork) => {
          this.numberTasks.delete(numberId);
          if (didWork && this.running) this.kick();
          return didWork;
        });
      this.numberTasks.set(numberId, task);
    }
  }

  private async serveNumber(numberId: number): Promise<boolean> {
    const { pool } = this.services;
    const number = await findNumberById(pool, numberId);
    if (!number) return false;
    const limited = number.messagingLimitTier !== 'TIER_UNLIMITED';
    if (limited) {
      this.guard();
      if (!(await acquireNumberLease(pool, numberId, this.id, this.now(), this.o.numberLeaseMs))) return false;
    }
    const pacer = new Pacer(recommendedSpacingMs(number.messagingLimitTier), () => this.now().getTime(), this.sleep, this.nextSlots.get(numberId));
    let didWork = false;
    try {
      while (this.running) {
        const job = await nextJobOfNumber(pool, numberId, this.now());
        if (!job) break;
        const result = await this.serveJob(job, number, pacer);
        didWork ||= result.didWork;
        if (result.next === 'stop') break;
      }
    } finally {
      const nextSlot = this.keepNextSlot(numberId, pacer);
      if (limited && !this.dead) await releaseNumberLeaseAtSlot(pool, numberId, this.id, nextSlot, this.now()).catch(() => undefined);
    }
    return didWork;
  }

  /** Keeps the number's next send slot for its next task in this process; returns it while it is ahead. */
  private keepNextSlot(numberId: number, pacer: Pacer): Date | null {
    const slot = pacer.nextSlotMs;
    if (!(slot > this.now().getTime())) {
      this.nextSlots.delete(numberId);
      return null;
    }
    if (this.nextSlots.size > 10_000) this.nextSlots.clear();
    this.nextSlots.set(numberId, slot);
    return new Date(slot);
  }

  private async serveJob(job: JobRow, number: NumberRecord, pacer: Pacer): Promise<JobResult> {
    const { services } = this;
    const { pool } = services;
    const limited = number.messagingLimitTier !== 'TIER_UNLIMITED';
    let didWork = false;
    let cursor = 0;
    // Pipelining: a window's outcomes are recorded while the next window is sent (at most one behind), and the
    // next chunks are copied into the work table while sending. Both are awaited before deciding that nothing
    // is left, and before returning.
    let recording: Promise<void> = Promise.resolve();
    // a window's outcomes were still being recorded when the last claim ran: that claim's quota counted its rows
    // as in flight, though some may end refused or retried (using no quota)
    let recordingBehind = false;
    let materializing: Promise<void> | undefined;
    const materializeAhead = (): Promise<void> | undefined => {
      if (materializing || job.materializedChunks >= job.chunkCount) return materializing;
      this.guard();
      const run: Promise<void> = materializeChunks(services, job.bulkId, this.o.materializeChunks)
        .then((n) => {
          job.materializedChunks = Math.max(job.materializedChunks, n);
        })
        .catch((err) => {
          if (!(err instanceof DispatcherKilledError)) services.logger.error({ err, bulkId: job.bulkId }, 'bulk dispatcher: copying recipients failed');
        })
        .finally(() => {
          if (materializing === run) materializing = undefined;
        });
      materializing = run;
      return run;
    };

    this.serving.add(job.bulkId);
    try {
      if (job.state === 'queued') {
        await startJob(this.ctx, job);
        didWork = true;
      }
      for (;;) {
        if (!this.running) return { didWork, next: 'stop' };
        if (this.cancelled.has(job.bulkId)) return { didWork, next: 'next-job' };
        const now = this.now();
        this.guard();
        const claim = {
          bulkId: job.bulkId, dispatcher: this.id, now, leaseUntil: new Date(now.getTime() + this.o.recipientLeaseMs), limit: windowSize(number, this.o),
        };
        if (limited && !(await acquireNumberLease(pool, number.id, this.id, now, this.o.numberLeaseMs))) return { didWork, next: 'stop' };
        const take = (fromIdx: number) => claimWindow(pool, claim, number, limited, fromIdx);
        let { claimed, blocked } = await take(cursor);
        if (claimed.length === 0 && !blocked && cursor > 0) {
          cursor = 0; // what is left is behind the cursor (retries, rows given back)
          ({ claimed, blocked } = await take(0));
        }

        if (claimed.length > 0) {
          cursor = claimed[claimed.length - 1].idx + 1;
          if (job.paused) await resumeJob(this.ctx, job);
          void materializeAhead();
          // sends start only in the first half of the rows' lease, and of the number's on a spaced tier (renewed at
          // the claim), the window's first in its first three quarters (review 16b: a process paused after its claim):
          // a slow provider never has a row sent after the sweep resolved it, nor two dispatchers pacing one number
          const leaseMs = limited ? Math.min(this.o.recipientLeaseMs, this.o.numberLeaseMs) : this.o.recipientLeaseMs;
          const outcomes = await sendWindow(this.ctx, job, claimed, pacer, new Date(now.getTime() + leaseMs / 2), new Date(now.getTime() + (leaseMs * 3) / 4));
          const previous = recording;
          recording = previous.then(() => recordOutcomes(this.ctx, job, outcomes));
          recording.catch(() => undefined); // awaited below (next window, or before returning)
          recordingBehind = true;
          await previous;
          didWork = true;
          await this.beat(job.bulkId);
          continue;
        }

        // nothing claimed: more recipients to copy in, quota, retries, other dispatchers, or the end
        await recording;
        const claimedWhileRecording = recordingBehind;
        recordingBehind = false;
        // claim again now that the window's outcomes are recorded, before pausing the bulk for a day
        if (blocked && claimedWhileRecording) continue;
        if (job.materializedChunks < job.chunkCount) {
          await materializeAhead();
          didWork = true;
          continue;
        }
        const fresh = await getJob(pool, job.bulkId);
        if (!fresh || fresh.cancelRequested || (fresh.state !== 'queued' && fresh.state !== 'processing')) return { didWork, next: 'next-job' };
        if (blocked) {
          await pauseJob(this.ctx, job, blocked);
          return { didWork: true, next: 'next-job' };
        }
        const progress = await jobProgress(pool, job.bulkId, this.now());
        if (progress.pending === 0 && progress.inFlight === 0) {
          await finishJob(this.ctx, job, progress);
          this.lastBeat.delete(job.bulkId);
          return { didWork: true, next: 'next-job' };
        }
        if (progress.inFlight === 0 && progress.delayed > 0 && progress.delayed === progress.pending && progress.nextAttemptAt) {
          // only retries remain: wait for the first of them (in slices of at most a second, so stop() is prompt)
          await this.sleep(Math.max(1, Math.min(progress.nextAttemptAt.getTime() - this.now().getTime(), 1000)));
          continue;
        }
        // the rest is in flight at another dispatcher (or locked by one): look again on the next poll
        return { didWork, next: 'stop' };
      }
    } finally {
      await Promise.allSettled([recording, materializing]);
      this.serving.delete(job.bulkId);
    }
  }

  private async beat(bulkId: string): Promise<void> {
    const t = Date.now();
    if (t - (this.lastBeat.get(bulkId) ?? 0) < 2000) return;
    this.lastBeat.set(bulkId, t);
    this.guard();
    await heartbeat(this.services.pool, bulkId, this.now());
  }

  private stopping(bulkId: string): boolean {
    return !this.running || this.cancelled.has(bulkId);
  }
}

/** The worker entry (src/workers/index.ts): one dispatcher per process. */
export function startBulkDispatcher(services: Services, options: BulkDispatcherOptions = {}): BulkDispatcher {
  const dispatcher = new BulkDispatcher(services, options);
  dispatcher.start();
  return dispatcher;
}
