// The dispatcher's state changes of a bulk job: each runs its bulk command (the event), then updates the job's
// row in the work table: started, paused (quota used up), resumed, finished.
import { runBulkCommand } from '../commands/bulk/lifecycle';
import { flushBatches, type JobProgress, type JobRow, setJobPaused, setJobState } from '../commands/bulk/work';
import type { ClaimedWindow } from './bulk-window-claim';
import type { DispatcherContext } from './bulk-dispatcher-context';

const metaOf = (job: JobRow) => ({ actor: 'bulk-dispatcher', companyId: job.companyId });

/** A queued job starts processing (StartBulkSend). */
export async function startJob(ctx: DispatcherContext, job: JobRow): Promise<void> {
  ctx.guard();
  await runBulkCommand(ctx.services, { type: 'StartBulkSend', data: { bulkId: job.bulkId, dispatcherId: ctx.id, at: ctx.now().toISOString() } }, metaOf(job));
  await setJobState(ctx.services.pool, job.bulkId, 'processing', ctx.now(), ['queued']);
}

/** A paused job got recipients again (BulkSendResumed). */
export async function resumeJob(ctx: DispatcherContext, job: JobRow): Promise<void> {
  ctx.guard();
  await runBulkCommand(ctx.services, { type: 'ResumeBulkSend', data: { bulkId: job.bulkId, at: ctx.now().toISOString() } }, metaOf(job));
  await setJobPaused(ctx.services.pool, job.bulkId, false, null, ctx.now());
  job.paused = false;
}

/** The quota is used up: the job pauses until the window frees room (BulkSendPaused). */
export async function pauseJob(ctx: DispatcherContext, job: JobRow, blocked: NonNullable<ClaimedWindow['blocked']>): Promise<void> {
  const { services } = ctx;
  ctx.guard();
  await runBulkCommand(
    services,
    {
      type: 'PauseBulkSend',
      data: {
        bulkId: job.bulkId, quotaUsed: blocked.used, quotaLimit: blocked.limit, resumeAt: blocked.resumeAt?.toISOString() ?? null,
        at: ctx.now().toISOString(),
      },
    },
    metaOf(job),
  );
  await setJobPaused(services.pool, job.bulkId, true, blocked.resumeAt, ctx.now());
  services.logger.info({ bulkId: job.bulkId, used: blocked.used, limit: blocked.limit, resumeAt: blocked.resumeAt }, 'bulk send paused: quota used up');
}

/** Nothing is left: batches still unappended are flushed, then the job finishes (FinishBulkSend). */
export async function finishJob(ctx: DispatcherContext, job: JobRow, progress: JobProgress): Promise<void> {
  const { services } = ctx;
  ctx.guard();
  if (progress.unappended > 0) await flushBatches(services, { bulkId: job.bulkId });
  await runBulkCommand(
    services,
    { type: 'FinishBulkSend', data: { bulkId: job.bulkId, dispatchedCount: progress.sent, rejectedCount: progress.failed, at: ctx.now().toISOString() } },
    metaOf(job),
  );
  await setJobState(services.pool, job.bulkId, 'finished', ctx.now(), ['queued', 'processing']);
}
