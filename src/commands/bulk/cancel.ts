// Cancelling a bulk send (POST /api/v1/platform-templates/bulk-sends/{id}/cancel/), docs/bulk.md "Cancel".
// Claims stop first (the job's cancel flag, checked by every claim; dispatchers drop the rest of the window they
// hold: this process's at once, every other's by the flag's notification), then BulkSendCancelled is appended.
// What was sent stays sent, and recipients already in flight get their outcome recorded. A crash between the two
// steps is finished by the lease sweep.
import { getBulkSend } from '../../projections/bulk/queries';
import type { Services } from '../../services';
import { DomainError } from '../decider';
import { BulkRefusedError } from './create';
import { runBulkCommand } from './lifecycle';
import { signalCancel } from './signals';
import { requestCancel, setJobState } from './work';

export async function cancelBulkSend(services: Services, input: { companyId: number; bulkId: string; actor: string }): Promise<void> {
  const bulk = await getBulkSend(services.pool, input.companyId, input.bulkId);
  if (!bulk) throw new BulkRefusedError('BULK_NOT_FOUND', 'Bulk send not found.');
  if (bulk.status !== 'QUEUED' && bulk.status !== 'PROCESSING') {
    throw new BulkRefusedError('BULK_FINISHED', `Bulk send ${input.bulkId} is already ${bulk.status} and cannot be cancelled.`);
  }
  const now = services.now();
  await requestCancel(services.pool, input.bulkId, now);
  signalCancel(input.bulkId);
  let result;
  try {
    result = await runBulkCommand(
      services,
      { type: 'CancelBulkSend', data: { bulkId: input.bulkId, cancelledBy: input.actor, at: now.toISOString() } },
      { actor: input.actor, companyId: input.companyId },
    );
  } catch (err) {
    if (err instanceof DomainError && err.code === 'BULK_FINISHED') throw new BulkRefusedError('BULK_FINISHED', err.message);
    throw err;
  }
  await setJobState(services.pool, input.bulkId, 'cancelled', services.now(), ['draft', 'queued', 'processing']);
  await services.runner.waitForEvents(result.position, result.events.map((e) => e.type));
}
