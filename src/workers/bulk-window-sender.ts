// Sending a claimed window: paced, at most `concurrency` provider calls in flight; each send's answer becomes
// an outcome (sent, failed, retry with backoff, or unsent when stopping or past the window's send-by time).
import type { ClaimedRecipient, JobRow, Outcome } from '../commands/bulk/work';
import { buildComponents } from '../commands/send/components';
import { isProviderError, mayHaveReachedProvider } from '../ports/provider';
import type { DispatcherContext } from './bulk-dispatcher-context';
import type { Pacer } from './bulk-pacer';

/**
 * Sends a claimed window (paced, bounded concurrency); returns the outcomes to record. No send starts at or after
 * `sendBy` (half the rows' lease), the window's first at or after `firstBy` (later: three quarters of the lease, so a
 * window whose claim was slow still sends): the rest goes back to pending, so a slow provider never has a recipient
 * sent after the lease sweep resolved its row as interrupted (failed). Review 16b: the first send had no bound; a
 * process paused (SIGSTOP, a VM freeze) between a claim and its first send, resumed after its number lease had passed
 * to another process's dispatcher, sent it all the same, beside the other dispatcher on the same number (and, resumed
 * after the rows' lease, it would send a recipient the sweep had already resolved as failed).
 */
export async function sendWindow(
  ctx: DispatcherContext,
  job: JobRow,
  rows: readonly ClaimedRecipient[],
  pacer: Pacer,
  sendBy: Date,
  firstBy: Date,
): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const inFlight = new Set<Promise<void>>();
  let started = 0;
  const late = () => ctx.now().getTime() >= (started > 0 ? sendBy : firstBy).getTime();
  for (const row of rows) {
    if (ctx.stopping(job.bulkId) || late()) {
      outcomes.push({ idx: row.idx, kind: 'unsent' });
      continue;
    }
    await pacer.wait();
    if (ctx.stopping(job.bulkId) || late()) {
      outcomes.push({ idx: row.idx, kind: 'unsent' });
      continue;
    }
    started++;
    const p: Promise<void> = sendOne(ctx, job, row, pacer).then((o) => {
      outcomes.push(o);
      inFlight.delete(p);
    });
    inFlight.add(p);
    if (inFlight.size >= ctx.o.concurrency) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return outcomes;
}

async function sendOne(ctx: DispatcherContext, job: JobRow, row: ClaimedRecipient, pacer: Pacer): Promise<Outcome> {
  const built = buildComponents(job.template, row.variables, row.buttonVariables);
  if (!built.ok) {
    return { idx: row.idx, kind: 'failed', code: 'invalid_variables', message: Object.values(built.errors).flat().join(' '), at: ctx.now() };
  }
  try {
    const { providerMessageId } = await ctx.provider.sendTemplate({
      phoneNumberId: job.phoneNumberId,
      to: row.phone,
      template: job.templateName,
      language: job.language,
      components: built.components,
    });
    return { idx: row.idx, kind: 'sent', providerMessageId, at: ctx.now() };
  } catch (err) {
    if (isProviderError(err)) {
      if (err.code === '130429') pacer.backoff(ctx.o.throughputBackoffMs);
      // a timeout or a lost connection may mean the provider accepted it: not retried (no double sends)
      if (err.retryable && !mayHaveReachedProvider(err) && row.attempts < ctx.o.maxAttempts) {
        const delay = Math.min(ctx.o.maxRetryDelayMs, ctx.o.retryBaseMs * 2 ** (row.attempts - 1));
        return { idx: row.idx, kind: 'retry', code: err.code, message: err.message, nextAttemptAt: new Date(ctx.now().getTime() + delay) };
      }
      return { idx: row.idx, kind: 'failed', code: err.code, message: err.message, at: ctx.now() };
    }
    ctx.services.logger.error({ err, bulkId: job.bulkId, index: row.idx }, 'bulk dispatcher: provider call failed unexpectedly');
    return { idx: row.idx, kind: 'failed', code: 'internal_error', message: 'the send failed unexpectedly', at: ctx.now() };
  }
}
