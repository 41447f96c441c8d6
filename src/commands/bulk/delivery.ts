// Provider delivery statuses for bulk recipients (docs/bulk.md, "Delivery statuses"). The delivery consumer
// (src/workers/delivery-consumer.ts) asks `findBulkMessageOwner` when no single send owns a provider message
// id, and calls `applyBulkStatus` for owners of kind 'bulk'. Statuses are appended to the recipient's chunk
// stream with ids derived from the notification, so a redelivered record is recognised; the bulk read model
// applies them monotonically and moves the counters in the same transaction.
import type { Pool } from 'pg';
import type { BulkEventData } from '../../events/bulk';
import { findBulkMessageByProviderId } from '../../projections/bulk/queries';
import type { ProviderMessageOwner } from '../../projections/sends/queries';
import type { StatusApplier } from '../../workers/delivery-consumer';
import { deterministicUuid } from '../send/ids';
import { chunkStreamId, parseChunkStreamId, recipientStatusChanges, type RecipientStatus } from './decider';
import { findWorkRecipientByProviderId } from './work';

/**
 * The bulk recipient owning a provider message id: the bulk read model, else the dispatcher's work table
 * (an outcome whose event is stored but not yet projected), else undefined (the consumer retries for a while).
 */
export async function findBulkMessageOwner(pool: Pool, providerMessageId: string): Promise<ProviderMessageOwner | undefined> {
  const found = (await findBulkMessageByProviderId(pool, providerMessageId)) ?? (await findWorkRecipientByProviderId(pool, providerMessageId));
  return found ? { providerMessageId, kind: 'bulk', streamId: chunkStreamId(found.bulkId, found.chunk), companyId: found.companyId } : undefined;
}

export const applyBulkStatus: StatusApplier = async (services, owner, update) => {
  const where = parseChunkStreamId(owner.streamId);
  if (!where) throw new Error(`not a bulk chunk stream: ${owner.streamId}`);
  const projected = await findBulkMessageByProviderId(services.pool, update.providerMessageId);
  let index: number;
  let current: RecipientStatus;
  if (projected) {
    index = projected.index;
    current = projected.status;
  } else {
    const work = await findWorkRecipientByProviderId(services.pool, update.providerMessageId);
    if (!work) throw new Error(`bulk recipient of ${update.providerMessageId} vanished`);
    index = work.index;
    current = 'sent';
  }
  const changes = recipientStatusChanges(current, update.status);
  if (changes.length === 0) return;
  const identity = `${update.providerMessageId}:${update.status}:${update.timestamp}`;
  await services.store.append(
    owner.streamId,
    changes.map((c, i) => {
      const data: BulkEventData<'BulkRecipientStatusRecorded'> = {
        bulkId: where.bulkId, companyId: owner.companyId, chunk: where.chunk, index, providerMessageId: update.providerMessageId,
        status: c.status, at: update.at, errorCode: c.status === 'failed' ? update.errorCode : null,
        errorMessage: c.status === 'failed' ? update.errorMessage : null, implied: c.implied,
      };
      return {
        type: 'BulkRecipientStatusRecorded',
        data,
        metadata: {
          eventId: deterministicUuid('bulk-provider-status', `${identity}:${i}:${c.status}`),
          correlationId: where.bulkId,
          causationId: null,
          companyId: owner.companyId,
          actor: 'provider',
          at: services.now().toISOString(),
        },
      };
    }),
    'any',
  );
};
