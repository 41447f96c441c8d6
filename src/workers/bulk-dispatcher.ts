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
// - Quota: unique recipients per number in a rolling 24 h; when it is used up the bulk is paused
//   (BulkSendPaused, status stays PROCESSING) until the window frees room (BulkSendResumed). Recipients already
//   in the window are sent without using quota.
// - Retryable provider errors go back to pending with exponential backoff (a timeout is not retried: the
//   message may have been accepted); others fail the recipient with the provider's code and message.
// - Outcomes: work rows and their outcome batch in one statement, then one BulkRecipientsDispatched /
//   BulkRecipientsRejected event per batch (window × chunk), then the batch is deleted; a crash in between
//   leaves the batch to be appended again under the same event id. When nothing is left the bulk finishes
//   COMPLETED / PARTIAL / FAILED.
// The clock and sleep are injectable (tests use a fake clock: pacing without waiting).
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { runBulkCommand } from '../commands/bulk/lifecycle';
import { bulkSignals } from '../commands/bulk/signals';
import {
  acquireNumberLease,
  appendBatches,
  claimRecipients,
  claimRecipientsWithQuota,
  type ClaimedRecipient,
  flushBatches,
  getJob,
  heartbeat,
  type JobRow,
  jobProgress,
  materializeChunks,
  nextJobOfNumber,
  numbersWithWork,
  type Outcome,
  type OutcomeBatch,
  releaseNumberLease,
  setJobPaused,
  setJobState,
  writeOutcomes,
} from '../commands/bulk/work';
import { buildComponents } from '../commands/send/components';
import { isProviderError, type MessagingProvider } from '../ports/provider';
import { dailyLimitOf, findNumberById, type NumberRecord, recommendedSpacingMs } from '../projections/accounts/queries';
import type { Services } from '../services';

export interface BulkDispatcherOptions {
  /** dispatcher id written on claimed rows (default host-pid-random) */
  id?: string;
  /** injectable clock (default services.now) */
  now?: () => Date;
  /** injectable sleep for pacing and retry waits (default setTimeout) */
  sleep?: (ms: number) => Promise<void>;
  /** the provider (default services.provider) */
  provider?: MessagingProvider;
  /** idle poll for new work, real time (default 500 ms; new bulks of this process wake it at once) */
  pollMs?: number;
  /** recipients claimed per window for TIER_UNLIMITED (default 200) */
  unlimitedWindow?: number;
  /** spaced tiers: a window covers about this much sending time (default 2 s; at least 1 recipient, at most 100) */
  windowMs?: number;
  /** provider calls in flight per number (default 16) */
  concurrency?: number;
  /** lease of an in_flight recipient (default 5 min): longer than any provider call with its retries */
  recipientLeaseMs?: number;
  /** lease of a number with a spaced tier (default 30 s, renewed every window) */
  numberLeaseMs?: number;
  /** attempts per recipient for retryable errors, the first included (default 4) */
  maxAttempts?: number;
  /** first retry delay, doubled per attempt (default 2 s), capped (default 60 s) */
  retryBaseMs?: number;
  maxRetryDelayMs?: number;
  /** number-level pause after a 130429 (throughput) answer (default 1 s) */
  throughputBackoffMs?: number;
  /** numbers served at once by this process (default 8) */
  maxNumbers?: number;
  /** chunk streams copied into the work table at a time (default 5) */
  materializeChunks?: number;
}

/** Thrown inside a killed dispatcher: nothing more is written (tests simulate a crash with kill()). */
class DispatcherKilledError extends Error {
  override name = 'DispatcherKilledError';
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const CATCH_UP_MS = 50;

/** Start times of sends on one number, spaced by the tier's spacing. */
export class Pacer {
  private next = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly spacingMs: number,
    private readonly now: () => number,
    private readonly sleep: (ms: number) => Promise<void>,
  ) {}

  async wait(): Promise<void> {
    if (this.spacingMs <= 0 && this.next === Number.NEGATIVE_INFINITY) return;
    let t = this.now();
    const ahead = this.next - t;
    // below a millisecond no timer is precise: send now, the debt carries over to the next slot
    if (ahead >= 1) {
      await this.sleep(ahead);
      t = this.now();
    }
    // Spacings under 10 ms are below timer precision and shorter than a window's database work: up to
    // CATCH_UP_MS of late slots may be caught up, so the rate holds on average. Longer spacings are never shortened.
    const floor = this.next === Number.NEGATIVE_INFINITY ? t : t - (this.spacingMs < 10 ? CATCH_UP_MS : 0);
    this.next = Math.max(this.next, floor) + this.spacingMs;
  }

  /** Nothing starts before `ms` from now (the provider asked to slow down). */
  backoff(ms: number): void {
    this.next = Math.max(this.next, this.now() + ms);
  }
}

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
  private readonly o: Required<Omit<BulkDispatcherOptions, 'id' | 'now' | 'sleep' | 'provider'>>;
  private readonly onKick = () => this.kick();
  private readonly onCancel = (bulkId: string) => {
    if (this.cancelled.size > 10_000) this.cancelled.clear();
    this.cancelled.add(bulkId);
  };
  private lastBeat = new Map<string, number>();

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
  }

  start(): void {
    if (this.running || this.dead) return;
    this.running = true;
    bulkSignals.on('kick', this.onKick);
    bulkSignals.on('cancel', this.onCancel);
    this.loopPromise = this.loop();
  }

  /** Graceful: no new claims, the rest of a held window goes back to pending, in-flight sends are recorded. */
  async stop(): Promise<void> {
    if (this.dead) return; // a killed dispatcher's calls may never return
    this.running = false;
    this.detach();
    this.wake?.();
    await this.loopPromise;
    await Promise.allSettled([...this.numberTasks.values()]);
  }

  /** Simulates a crash (tests): from now on this dispatcher writes nothing; its rows and leases stay behind. */
  kill(): void {
    this.dead = true;
    this.running = false;
    this.detach();
    this.wake?.();
  }

  kick(): void {
    this.kicked = true;
    this.wake?.();
  }

  private detach(): void {
    bulkSignals.off('kick', this.onKick);
    bulkSignals.off('cancel', this.onCancel);
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
    const pacer = new Pacer(recommendedSpacingMs(number.messagingLimitTier), () => this.now().getTime(), this.sleep);
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
      if (limited && !this.dead) await releaseNumberLease(pool, numberId, this.id).catch(() => undefined);
    }
    return didWork;
  }

  private windowSize(number: NumberRecord): number {
    const spacing = recommendedSpacingMs(number.messagingLimitTier);
    if (spacing <= 0) return this.o.unlimitedWindow;
    return Math.max(1, Math.min(100, Math.floor(this.o.windowMs / spacing)));
  }

  private async serveJob(job: JobRow, number: NumberRecord, pacer: Pacer): Promise<JobResult> {
    const { services } = this;
    const { pool } = services;
    const meta = { actor: 'bulk-dispatcher', companyId: job.companyId };
    const limited = number.messagingLimitTier !== 'TIER_UNLIMITED';
    let didWork = false;
    let cursor = 0;
    // Pipelining: a window's outcomes are recorded while the next window is sent (at most one behind), and the
    // next chunks are copied into the work table while sending. Both are awaited before deciding that nothing
    // is left, and before returning.
    let recording: Promise<void> = Promise.resolve();
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

    if (job.state === 'queued') {
      this.guard();
      await runBulkCommand(services, { type: 'StartBulkSend', data: { bulkId: job.bulkId, dispatcherId: this.id, at: this.now().toISOString() } }, meta);
      await setJobState(pool, job.bulkId, 'processing', this.now(), ['queued']);
      didWork = true;
    }

    try {
      for (;;) {
        if (!this.running) return { didWork, next: 'stop' };
        if (this.cancelled.has(job.bulkId)) return { didWork, next: 'next-job' };
        const now = this.now();
        this.guard();
        const claim = {
          bulkId: job.bulkId, dispatcher: this.id, now, leaseUntil: new Date(now.getTime() + this.o.recipientLeaseMs), limit: this.windowSize(number),
        };
        if (limited && !(await acquireNumberLease(pool, number.id, this.id, now, this.o.numberLeaseMs))) return { didWork, next: 'stop' };
        const take = async (fromIdx: number) => {
          if (!limited) return { claimed: await claimRecipients(pool, { ...claim, fromIdx }), blocked: undefined };
          const q = await claimRecipientsWithQuota(pool, { ...claim, fromIdx, numberId: number.id, dailyLimit: dailyLimitOf(number.messagingLimitTier) });
          return { claimed: q.claimed, blocked: q.blocked ? { used: q.used, limit: q.limit, resumeAt: q.resumeAt } : undefined };
        };
        let { claimed, blocked } = await take(cursor);
        if (claimed.length === 0 && !blocked && cursor > 0) {
          cursor = 0; // what is left is behind the cursor (retries, rows given back)
          ({ claimed, blocked } = await take(0));
        }

        if (claimed.length > 0) {
          cursor = claimed[claimed.length - 1].idx + 1;
          if (job.paused) {
            this.guard();
            await runBulkCommand(services, { type: 'ResumeBulkSend', data: { bulkId: job.bulkId, at: this.now().toISOString() } }, meta);
            await setJobPaused(pool, job.bulkId, false, null, this.now());
            job.paused = false;
          }
          void materializeAhead();
          const outcomes = await this.sendWindow(job, claimed, pacer);
          const previous = recording;
          recording = previous.then(() => this.record(job, outcomes));
          recording.catch(() => undefined); // awaited below (next window, or before returning)
          await previous;
          didWork = true;
          await this.beat(job.bulkId);
          continue;
        }

        // nothing claimed: more recipients to copy in, quota, retries, other dispatchers, or the end
        await recording;
        if (job.materializedChunks < job.chunkCount) {
          await materializeAhead();
          didWork = true;
          continue;
        }
        const fresh = await getJob(pool, job.bulkId);
        if (!fresh || fresh.cancelRequested || (fresh.state !== 'queued' && fresh.state !== 'processing')) return { didWork, next: 'next-job' };
        if (blocked) {
          this.guard();
          await runBulkCommand(
            services,
            {
              type: 'PauseBulkSend',
              data: {
                bulkId: job.bulkId, quotaUsed: blocked.used, quotaLimit: blocked.limit, resumeAt: blocked.resumeAt?.toISOString() ?? null,
                at: this.now().toISOString(),
              },
            },
            meta,
          );
          await setJobPaused(pool, job.bulkId, true, blocked.resumeAt, this.now());
          services.logger.info({ bulkId: job.bulkId, used: blocked.used, limit: blocked.limit, resumeAt: blocked.resumeAt }, 'bulk send paused: quota used up');
          return { didWork: true, next: 'next-job' };
        }
        const progress = await jobProgress(pool, job.bulkId, this.now());
        if (progress.pending === 0 && progress.inFlight === 0) {
          this.guard();
          if (progress.unappended > 0) await flushBatches(services, { bulkId: job.bulkId });
          await runBulkCommand(
            services,
            { type: 'FinishBulkSend', data: { bulkId: job.bulkId, dispatchedCount: progress.sent, rejectedCount: progress.failed, at: this.now().toISOString() } },
            meta,
          );
          await setJobState(pool, job.bulkId, 'finished', this.now(), ['queued', 'processing']);
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
    }
  }

  /**
   * Records a window: outcomes and their batches (retried briefly: the rows would otherwise stay in flight and
   * end as interrupted), then the batch events (a failure leaves the batches for the flush: nothing is lost).
   */
  private async record(job: JobRow, outcomes: readonly Outcome[]): Promise<void> {
    let batches: OutcomeBatch[] = [];
    for (let attempt = 1; ; attempt++) {
      this.guard();
      try {
        batches = await writeOutcomes(this.services.pool, job, this.id, outcomes, this.now());
        break;
      } catch (err) {
        if (err instanceof DispatcherKilledError || attempt >= 3) throw err;
        this.services.logger.warn({ err, bulkId: job.bulkId }, 'bulk dispatcher: recording outcomes failed, retrying');
        await realSleep(200 * attempt);
      }
    }
    this.guard();
    try {
      await appendBatches(this.services, batches);
    } catch (err) {
      if (err instanceof DispatcherKilledError) throw err;
      this.services.logger.warn({ err, bulkId: job.bulkId }, 'bulk dispatcher: appending outcome events failed; the flush appends them later');
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

  /** Sends a claimed window (paced, bounded concurrency); returns the outcomes to record. */
  private async sendWindow(job: JobRow, rows: readonly ClaimedRecipient[], pacer: Pacer): Promise<Outcome[]> {
    const outcomes: Outcome[] = [];
    const inFlight = new Set<Promise<void>>();
    for (const row of rows) {
      if (this.stopping(job.bulkId)) {
        outcomes.push({ idx: row.idx, kind: 'unsent' });
        continue;
      }
      await pacer.wait();
      if (this.stopping(job.bulkId)) {
        outcomes.push({ idx: row.idx, kind: 'unsent' });
        continue;
      }
      const p: Promise<void> = this.sendOne(job, row, pacer).then((o) => {
        outcomes.push(o);
        inFlight.delete(p);
      });
      inFlight.add(p);
      if (inFlight.size >= this.o.concurrency) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    return outcomes;
  }

  private async sendOne(job: JobRow, row: ClaimedRecipient, pacer: Pacer): Promise<Outcome> {
    const built = buildComponents(job.template, row.variables, row.buttonVariables);
    if (!built.ok) {
      return { idx: row.idx, kind: 'failed', code: 'invalid_variables', message: Object.values(built.errors).flat().join(' '), at: this.now() };
    }
    try {
      const { providerMessageId } = await this.provider.sendTemplate({
        phoneNumberId: job.phoneNumberId,
        to: row.phone,
        template: job.templateName,
        language: job.language,
        components: built.components,
      });
      return { idx: row.idx, kind: 'sent', providerMessageId, at: this.now() };
    } catch (err) {
      if (isProviderError(err)) {
        if (err.code === '130429') pacer.backoff(this.o.throughputBackoffMs);
        // a timeout may mean the provider accepted it: not retried (no double sends)
        if (err.retryable && err.code !== 'timeout' && row.attempts < this.o.maxAttempts) {
          const delay = Math.min(this.o.maxRetryDelayMs, this.o.retryBaseMs * 2 ** (row.attempts - 1));
          return { idx: row.idx, kind: 'retry', code: err.code, message: err.message, nextAttemptAt: new Date(this.now().getTime() + delay) };
        }
        return { idx: row.idx, kind: 'failed', code: err.code, message: err.message, at: this.now() };
      }
      this.services.logger.error({ err, bulkId: job.bulkId, index: row.idx }, 'bulk dispatcher: provider call failed unexpectedly');
      return { idx: row.idx, kind: 'failed', code: 'internal_error', message: 'the send failed unexpectedly', at: this.now() };
    }
  }
}

/** The worker entry (src/workers/index.ts): one dispatcher per process. */
export function startBulkDispatcher(services: Services, options: BulkDispatcherOptions = {}): BulkDispatcher {
  const dispatcher = new BulkDispatcher(services, options);
  dispatcher.start();
  return dispatcher;
}
