// The bulk lease sweep (node-cron, every 15 s by default; docs/bulk.md "Crashes and leases"). Finds the work of
// dispatchers that died and hands it to the live ones:
//  1. recipients in flight past their lease are resolved as failed, "interrupted, outcome unknown" (their
//     send may or may not have reached the provider: they are never sent again), and their events appended;
//  2. outcomes written but never appended as events (a crash between the two) are appended (same event ids);
//  3. expired number leases are dropped, so another dispatcher takes the number;
//  4. creations cut short: a draft job whose BulkSendCreated exists becomes queued, else it is deleted;
//  5. cancellations cut short (flag set, event missing) are completed;
//  6. work rows of bulks finished more than `retentionMs` ago are deleted (the read model keeps them);
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
  expiredReservations: number;
}

export async function sweepBulkLeases(services: Services, options: SweepOptions = {}): Promise<SweepReport> {
  const now = (options.now ?? services.now)();
  const { pool } = services;
  const report: SweepReport = {
    skipped: false, interrupted: 0, flushed: 0, leasesReleased: 0, draftsPromoted: 0, draftsDeleted: 0, cancelsCompleted: 0, purgedRecipients: 0,
    expiredReservations: 0,
  };
  const swept = await withSessionLock(pool, SWEEP_LOCK, async () => {
    const interrupted = await resolveExpiredInFlight(pool, now);
    report.interrupted = interrupted.count;
    report.flushed = (await flushBatches(services, { ids: interrupted.batchIds }))
      + (await flushBatches(services, { olderThan: new Date(now.getTime() - (options.flushGraceMs ?? 30_000)) }));
    // over by Postgres's clock too: a sweep whose clock runs ahead does not end a live lease (docs/reliability.md)
    report.leasesReleased = (await pool.query('DELETE FROM bulk_work.number_leases WHERE lease_until < $1 AND lease_until < now()', [now])).rowCount ?? 0;

    const stale = new Date(now.getTime() - (options.staleMs ?? 120_000));
    const drafts = await pool.query<{ bulk_id: string }>(`SELECT bulk_id FROM bulk_work.jobs WHERE state = 'draft' AND created_at < $1`, [stale]);
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

    const purge = await pool.query(
      `DELETE FROM bulk_work.recipients r USING bulk_work.jobs j
        WHERE r.bulk_id = j.bulk_id AND j.state IN ('finished', 'cancelled') AND j.updated_at < $1
          AND NOT EXISTS (SELECT 1 FROM bulk_work.outcome_batches b WHERE b.bulk_id = j.bulk_id)`,
      [new Date(now.getTime() - (options.retentionMs ?? 48 * 3600_000))],
    );
    report.purgedRecipients = purge.rowCount ?? 0;
    report.expiredReservations = await purgeExpiredQuotaReservations(pool, now);
    return true;
  });
  if (!swept) return { ...report, skipped: true };
  if (report.interrupted || report.flushed || report.leasesReleased || report.draftsPromoted) kickDispatchers();
  return report;
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
