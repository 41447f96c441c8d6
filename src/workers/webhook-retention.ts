// The webhook log's retention (docs/webhooks.md, "Retention"): every 10 minutes, attempts logged and deliveries
// finished (succeeded, failed or dropped) more than WEBHOOKS_RETENTION_DAYS ago are deleted, in batches, so the
// outbox and its attempt log stay bounded however many events a company sends; so are deliveries set aside (their
// endpoint disabled and neither enabled again nor deleted) queued more than WEBHOOKS_RETENTION_DAYS ago (since
// review 22: before, they were kept for good). Pending deliveries of enabled endpoints are never deleted; then the
// attempt counts left at 0 (a deleted endpoint's), and the pending deliveries of deleted endpoints left by a fan-out
// that raced the deletion are dropped. Any process may run it: a session advisory lock lets one purge run at a time.
import { dropOrphanedDeliveries, forgetEmptyAttemptCounts, purgeExpiredSetAside, purgeWebhookLog } from '../projections/webhooks/deliveries';
import type { Services } from '../services';
import { withSessionLock } from '../shared/tx';
import { startCronJob } from './cron-job';

export const WEBHOOK_RETENTION_CRON = '0 */10 * * * *';
const PURGE_LOCK = 'webhook-log-purge';
const DAY_MS = 86_400_000;
/** how long a pending delivery of an endpoint that no longer exists is left before it is dropped (claims skip it) */
export const ORPHAN_AFTER_MS = 3_600_000;

export interface WebhookRetentionOptions {
  now?: () => Date;
  /** rows deleted per statement (default 5,000: each statement is short, nothing is locked for long) */
  batchSize?: number;
  /** cron expression (default every 10 minutes) */
  schedule?: string;
}

export interface PurgeReport {
  /** another process was purging */
  skipped: boolean;
  attempts: number;
  /** deliveries deleted: finished ones, and set-aside ones queued before the retention */
  deliveries: number;
  /** pending deliveries of deleted endpoints dropped */
  orphaned: number;
}

/** Deletes the expired part of the webhook log until none is left (or `stopping()` says so). */
export async function purgeExpiredWebhookLog(
  services: Services,
  options: WebhookRetentionOptions = {},
  stopping: () => boolean = () => false,
): Promise<PurgeReport> {
  const now = (options.now ?? services.now)();
  const before = new Date(now.getTime() - services.config.webhooks.retentionDays * DAY_MS);
  const batchSize = options.batchSize ?? 5_000;
  const purged = await withSessionLock(services.pool, PURGE_LOCK, async () => {
    const total = { attempts: 0, deliveries: 0 };
    for (;;) {
      const batch = await purgeWebhookLog(services.pool, before, batchSize);
      const setAside = await purgeExpiredSetAside(services.pool, before, now, batchSize);
      total.attempts += batch.attempts;
      total.deliveries += batch.deliveries + setAside;
      services.metrics.webhookLogPurged.labels('attempts').inc(batch.attempts);
      services.metrics.webhookLogPurged.labels('deliveries').inc(batch.deliveries + setAside);
      if ((batch.attempts < batchSize && batch.deliveries < batchSize && setAside < batchSize) || stopping()) break;
    }
    await forgetEmptyAttemptCounts(services.pool);
    const orphaned = await dropOrphanedDeliveries(services.pool, new Date(now.getTime() - ORPHAN_AFTER_MS), now, batchSize);
    return { ...total, orphaned };
  });
  return purged ? { skipped: false, ...purged } : { skipped: true, attempts: 0, deliveries: 0, orphaned: 0 };
}

/** The worker entry (src/workers/index.ts). */
export function startWebhookRetention(services: Services, options: WebhookRetentionOptions = {}): { stop(): Promise<void> } {
  return startCronJob('webhook-log-purge', options.schedule ?? WEBHOOK_RETENTION_CRON, (stopping) =>
    purgeExpiredWebhookLog(services, options, stopping)
      .then((report) => {
        if (report.attempts || report.deliveries || report.orphaned) services.logger.info({ ...report }, 'webhook log purged');
      })
      .catch((err) => services.logger.error({ err }, 'webhook log purge failed')));
}
