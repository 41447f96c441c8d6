// Recording a sent window: its outcomes and their batches in the work table, then the batch events.
import { appendBatches, type JobRow, type Outcome, type OutcomeBatch, writeOutcomes } from '../commands/bulk/work';
import { type DispatcherContext, DispatcherKilledError, realSleep } from './bulk-dispatcher-context';

/**
 * Records a window: outcomes and their batches (retried briefly: the rows would otherwise stay in flight and
 * end as interrupted), then the batch events (a failure leaves the batches for the flush: nothing is lost).
 */
export async function recordOutcomes(ctx: DispatcherContext, job: JobRow, outcomes: readonly Outcome[]): Promise<void> {
  let batches: OutcomeBatch[] = [];
  for (let attempt = 1; ; attempt++) {
    ctx.guard();
    try {
      batches = await writeOutcomes(ctx.services.pool, job, ctx.id, outcomes, ctx.now());
      break;
    } catch (err) {
      if (err instanceof DispatcherKilledError || attempt >= 3) throw err;
      ctx.services.logger.warn({ err, bulkId: job.bulkId }, 'bulk dispatcher: recording outcomes failed, retrying');
      await realSleep(200 * attempt);
    }
  }
  ctx.guard();
  try {
    await appendBatches(ctx.services, batches);
  } catch (err) {
    if (err instanceof DispatcherKilledError) throw err;
    ctx.services.logger.warn({ err, bulkId: job.bulkId }, 'bulk dispatcher: appending outcome events failed; the flush appends them later');
  }
}
