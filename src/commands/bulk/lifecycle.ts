// Lifecycle commands of a bulk send (stream bulk-{id}), for the dispatcher, the lease sweep and the cancel
// route. The decider makes start/pause/resume/finish idempotent, so racing dispatchers record each once.
import type { Services } from '../../services';
import { type HandleResult, handleCommand } from '../handle';
import { type BulkCommand, bulkDecider, type BulkLifecycleEvent, type BulkState, bulkStreamId } from './decider';

export function runBulkCommand(
  services: Services,
  command: BulkCommand,
  meta: { actor: string; companyId: number },
): Promise<HandleResult<BulkLifecycleEvent, BulkState>> {
  return handleCommand(services.store, bulkStreamId(command.data.bulkId), bulkDecider, command, {
    actor: meta.actor,
    companyId: meta.companyId,
    correlationId: command.data.bulkId,
    now: services.now,
  });
}
