// The bulk lease sweep (node-cron, every 15 s by default; docs/bulk.md "Crashes and leases"). Finds the work of
// dispatchers that died and hands it to the live ones:
//  1. recipients in flight past their lease are resolved as failed, "interrupted, outcome unknown" (their
//     send may or may not have reached the provider: they are never sent again), and their events appended;
//  2. outcomes written but never appended as events (a crash between the two) are appended (same event ids);
//  3. expired number leases are dropped, so another dispatcher takes the number;
//  4. creations cut short: a draft job whose BulkSendCreated exists becomes queued, else it is deleted;
//  5. cancellations cut short (flag set, event missing) are completed;
//  6. work rows of bulks finished more than `retentionMs` ago are deleted (the read model keeps them), a bounded
//     number per sweep, each statement short (`purgeFinishedWork`, below);
//  7. expired quota reservations of every number are deleted (src/commands/send/quota-gate.ts: a number only
//     deletes its own when it reserves again near its limit).
// Any process may run it: a session advisory lock lets one sweep run at a time; every step is idempotent.
import { DomainError } from '../commands/decider';
import { bulkStreamId } from '../commands/bulk/decider';
import { runBulkCommand } from '../commands/bulk/lifecycle';
import { kickDispatchers } from '../commands/bulk/signals';
import { flushBatches, resolveExpiredInFlight, setJobState } from '../commands/bulk/work';
import { purgeExpiredQuotaReservations } from '../commands/send/quota-gate';
import type { Services } from '../services';
import { withSessionLock } from '../shared/tx';
import { startCronJob } from './cron-job';

export const BULK_LEASE_CRON = '*/15 * * * * *';
const SWEEP_LOCK = 'bulk-lease-sweep';

export interface SweepOptions {
  now?: () => Date;
  /** outcomes older than this without their event are appended (default 30 s: a live dispatcher takes ms) */
  flushGraceMs?: number;
  /** drafts and half-done cancels older than this are resolved (default 2 min) */
  staleMs?: number;
  /** work rows of finished bulks are kept this long (default 48 h) */
  retentionMs?: number;
  /** work rows deleted per statement (default 5,000) */
  purgeBatch?: number;
  /** work rows deleted per sweep at most (default 50,000; the rest at the next sweeps) */
  purgePerSweep?: number;
}

export interface SweepReport {
  skipped: boolean;
  interrupted: number;
  flushed: number;
  leasesReleased: number;
  draftsPromoted: number;
  draftsDeleted: number;
  cancelsCompleted: number;
  purgedRecipients: number;
  /** finished jobs whose work rows are all deleted now (marked, never looked at again) */
  purgedJobs: number;
  expiredReservations: number;
}

export async function sweepBulkLeases(services: Services, options: SweepOptions = {}): Promise<SweepReport> {
  const now = (options.now ?? services.now)();
  const { pool } = services;
  const report: SweepReport = {
    skipped: false, interrupted: 0, flushed: 0, leasesReleased: 0, draftsPromoted: 0, draftsDeleted: 0, cancelsCompleted: 0, purgedRecipients: 0,
    purgedJobs: 0, expiredReservations: 0,
  };
  const swept = await withSessionLock(pool, SWEEP_LOCK, async () => {
    const interrupted = await resolveExpiredInFlight(pool, now);
    report.interrupted = interrupted.count;
    report.flushed = (await flushBatches(services, { ids: interrupted.batchIds }))
      + (await flushBatches(services, { olderThan: new Date(now.getTime() - (options.flushGraceMs ?? 30_000)) }));
    // over by Postgres's clock too: a sweep whose clock runs ahead does not end a live lease (docs/reliability.md)
    report.leasesReleased = (await pool.query('DELETE FROM bulk_work.number_leases WHERE lease_until < $1 AND lease_until < now()', [now])).rowCount ?? 0;

    const stale = new Date(now.getTime() - (options.staleMs ?? 120_000));
    const drafts = await pool.query<{ bulk_id: string }>(`SELECT bulk_id FROM bulk_work.jobs WHERE state = 'draft' AND created_at < $1 ORDER BY created_at`, [stale]);
    for (const { bulk_id } of drafts.rows) {
      const events = await services.store.readStream(bulkStreamId(bulk_id));
      if (events.some((e) => e.type === 'BulkSendCreated')) {
        if (await setJobState(pool, bulk_id, 'queued', now, ['draft'])) report.draftsPromoted++;
      } else {
        const del = await pool.query(`DELETE FROM bulk_work.jobs WHERE bulk_id = $1 AND state = 'draft'`, [bulk_id]);
        await pool.query('DELETE FROM bulk_work.recipients WHERE bulk_id = $1', [bulk_id]);
        report.draftsDeleted += del.rowCount ?? 0;
      }
    }

    const cancels = await pool.query<{ bulk_id: string; company_id: number }>(
      `SELECT bulk_id, company_id FROM bulk_work.jobs WHERE cancel_requested AND state IN ('queued', 'processing') AND updated_at < $1`,
      [stale],
    );
    for (const { bulk_id, company_id } of cancels.rows) {
      try {
        await runBulkCommand(
          services,
          { type: 'CancelBulkSend', data: { bulkId: bulk_id, cancelledBy: 'system', at: now.toISOString() } },
          { actor: 'system', companyId: company_id },
        );
        await setJobState(pool, bulk_id, 'cancelled', now);
        report.cancelsCompleted++;
      } catch (err) {
        // it finished before the cancel was recorded: it stays finished
        if (err instanceof DomainError && err.code === 'BULK_FINISHED') await setJobState(pool, bulk_id, 'finished', now);
        else throw err;
      }
    }

    const purged = await purgeFinishedWork(pool, new Date(now.getTime() - (options.retentionMs ?? 48 * 3600_000)), now, options);
    report.purgedRecipients = purged.recipients;
    report.purgedJobs = purged.jobs;
    report.expiredReservations = await purgeExpiredQuotaReservations(pool, now);
    return true;
  });
  if (!swept) return { ...report, skipped: true };
  if (report.interrupted || report.flushed || report.leasesReleased || report.draftsPromoted) kickDispatchers();
  return report;
}

/** Finished jobs looked at per sweep at most (each one's work rows are deleted, then it is marked). */
const PURGE_JOBS_PER_SWEEP = 100;

/**
 * Deletes the work rows of jobs finished or cancelled before `before` whose outcomes are all appended (no outcome
 * batch left), at most `purgePerSweep` rows, `purgeBatch` per statement (a 100,000-recipient bulk is 20 short
 * statements, not one that holds its rows and indexes for seconds), then marks each job whose rows are all gone
 * (`work_purged_at`, migration 0018), so that no later sweep reads it again. The jobs are found through the partial
 * index `jobs_work_to_purge` (its predicate written the same here): a sweep reads the jobs it has work for, never the
 * jobs of the past, nor the live work rows of other bulks (review 19, docs/growth.md). A job left half-purged when the
 * budget runs out is taken first by the next sweep (oldest first).
 */
export async function purgeFinishedWork(
  pool: Services['pool'],
  before: Date,
  now: Date,
  options: Pick<SweepOptions, 'purgeBatch' | 'purgePerSweep'> = {},
): Promise<{ recipients: number; jobs: number }> {
  const batch = options.purgeBatch ?? 5_000;
  let budget = options.purgePerSweep ?? 50_000;
  const done = { recipients: 0, jobs: 0 };
  const { rows } = await pool.query<{ bulk_id: string }>(
    `SELECT j.bulk_id FROM bulk_work.jobs j
      WHERE j.state IN ('finished', 'cancelled') AND j.work_purged_at IS NULL AND j.updated_at < $1
        AND NOT EXISTS (SELECT 1 FROM bulk_work.outcome_batches b WHERE b.bulk_id = j.bulk_id)
      ORDER BY j.updated_at LIMIT $2`,
    [before, PURGE_JOBS_PER_SWEEP],
  );
  for (const { bulk_id } of rows) {
    for (;;) {
      if (budget <= 0) return done;
      const limit = Math.min(batch, budget);
      // the next rows along the primary key (ORDER BY idx: without it, or with `idx IN (...)`, the planner read the
      // whole work table when the bulk was a large share of it), deleted by address (a finished bulk's rows are no
      // longer updated): 5,000 of a 100,000-row bulk among 200,000 work rows, 25 ms, an index scan and a TID scan
      const deleted = (await pool.query(
        `DELETE FROM bulk_work.recipients WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM bulk_work.recipients WHERE bulk_id = $1 ORDER BY idx LIMIT $2))`,
        [bulk_id, limit],
      )).rowCount ?? 0;
      done.recipients += deleted;
      budget -= deleted;
      if (deleted < limit) break;
    }
    const marked = await pool.query(
      `UPDATE bulk_work.jobs SET work_purged_at = $2
        WHERE bulk_id = $1 AND state IN ('finished', 'cancelled') AND work_purged_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM bulk_work.recipients r WHERE r.bulk_id = $1)`,
      [bulk_id, now],
    );
    done.jobs += marked.rowCount ?? 0;
  }
  return done;
}

export interface BulkLeaseCronOptions extends SweepOptions {
  /** cron expression (default every 15 s) */
  schedule?: string;
}

/** The worker entry (src/workers/index.ts). */
export function startBulkLeaseCron(services: Services, options: BulkLeaseCronOptions = {}): { stop(): Promise<void> } {
  return startCronJob('bulk-lease-sweep', options.schedule ?? BULK_LEASE_CRON, () =>
    sweepBulkLeases(services, options)
      .then((report) => {
        if (report.interrupted || report.flushed || report.draftsPromoted || report.draftsDeleted || report.cancelsCompleted) {
          services.logger.info({ ...report }, 'bulk lease sweep');
        }
      })
      .catch((err) => services.logger.error({ err }, 'bulk lease sweep failed')));
}
