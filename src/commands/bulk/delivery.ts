// Provider delivery statuses for bulk recipients (docs/bulk.md, "Delivery statuses"). The delivery consumer
// (src/workers/delivery-consumer.ts) asks `findBulkMessageOwner` when no single send owns a provider message
// id, and calls `applyBulkStatus` for owners of kind 'bulk'. Statuses are appended to the recipient's chunk
// stream with ids derived from the notification, so a redelivered record is recognised; the bulk read model
// applies them monotonically and moves the counters in the same transaction.
import type { Pool } from 'pg';
import type { BulkEventData } from '../../events/bulk';
import { BULK_SCHEMA } from '../../projections/bulk/projection';
import { findBulkMessageByProviderId } from '../../projections/bulk/queries';
import type { ProviderMessageOwner } from '../../projections/sends/queries';
import type { EventToAppend, StreamAppend } from '../../ports/event-store';
import type { Services } from '../../services';
import type { ProviderStatusUpdate, StatusApplier } from '../delivery-status';
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

/**
 * For the delivery consumer's single owner query over a batch (`$1` = the provider message ids): the bulk
 * recipients owning any of them, as rows (provider_message_id, rank, kind, stream_id, company_id, bulk_id, chunk)
 * to UNION ALL with the single sends' owner index (rank 0). Rank 1: the bulk read model, rank 2: the dispatcher's
 * work table (stored, not yet projected outcomes); the lowest rank wins, as in findBulkMessageOwner.
 * Turn a row into an owner with `bulkOwnerFromRow`.
 */
export const BULK_OWNERS_SELECT = `
SELECT m.provider_message_id, 1 AS rank, 'bulk' AS kind, NULL::text AS stream_id, b.company_id, m.bulk_id::text AS bulk_id, m.chunk
  FROM ${BULK_SCHEMA}.messages m JOIN ${BULK_SCHEMA}.bulk_sends b ON b.bulk_id = m.bulk_id
 WHERE m.provider_message_id = ANY($1::text[])
UNION ALL
SELECT r.provider_message_id, 2, 'bulk', NULL::text, j.company_id, r.bulk_id::text, r.chunk
  FROM bulk_work.recipients r JOIN bulk_work.jobs j ON j.bulk_id = r.bulk_id
 WHERE r.provider_message_id = ANY($1::text[])
   AND NOT EXISTS (SELECT 1 FROM bulk_work.outcome_batches b WHERE b.bulk_id = r.bulk_id AND r.idx = ANY(b.idxs))`;

export function bulkOwnerFromRow(row: { provider_message_id: string; company_id: number; bulk_id: string; chunk: number }): ProviderMessageOwner {
  return { providerMessageId: row.provider_message_id, kind: 'bulk', streamId: chunkStreamId(row.bulk_id, row.chunk), companyId: row.company_id };
}

export const applyBulkStatus: StatusApplier = async (services, owner, update) => {
  const recipient = (await findBulkRecipientStatuses(services.pool, [update.providerMessageId])).get(update.providerMessageId);
  if (!recipient) throw new Error(`bulk recipient of ${update.providerMessageId} vanished`);
  const changes = recipientStatusChanges(recipient.status, update.status);
  if (changes.length === 0) return;
  await services.store.append(owner.streamId, statusEvents(services, owner, chunkOf(owner), recipient.index, update, changes), 'any');
};

/** A status of a bulk recipient, as the delivery consumer's batch hands it over. */
export interface BulkStatusItem {
  owner: ProviderMessageOwner;
  update: ProviderStatusUpdate;
}

/**
 * The batch form of applyBulkStatus: every status decided in order on the recipients' current statuses (one
 * query for all of them), the events grouped by chunk stream for one appendMany. `missing`: provider ids whose
 * recipient was found nowhere (the caller applies their statuses one by one, as applyBulkStatus would).
 */
export async function decideBulkStatuses(
  services: Services,
  items: readonly BulkStatusItem[],
): Promise<{ appends: StreamAppend[]; missing: Set<string> }> {
  const recipients = await findBulkRecipientStatuses(services.pool, [...new Set(items.map((x) => x.update.providerMessageId))]);
  const missing = new Set<string>();
  const byStream = new Map<string, EventToAppend[]>();
  for (const { owner, update } of items) {
    const recipient = recipients.get(update.providerMessageId);
    if (!recipient) {
      missing.add(update.providerMessageId);
      continue;
    }
    const changes = recipientStatusChanges(recipient.status, update.status);
    if (changes.length === 0) continue;
    recipient.status = changes[changes.length - 1].status;
    const events = statusEvents(services, owner, chunkOf(owner), recipient.index, update, changes);
    const stream = byStream.get(owner.streamId);
    if (stream) stream.push(...events);
    else byStream.set(owner.streamId, events);
  }
  return { appends: [...byStream].map(([streamId, events]) => ({ streamId, events, expected: 'any' as const })), missing };
}

/** Current statuses by provider id: the bulk read model's, else 'sent' for an outcome stored but not projected yet. */
async function findBulkRecipientStatuses(pool: Pool, ids: readonly string[]): Promise<Map<string, { index: number; status: RecipientStatus }>> {
  const r = await pool.query<{ provider_message_id: string; idx: number; status: RecipientStatus }>({
    name: 'bulk_recipient_statuses',
    text: `SELECT DISTINCT ON (provider_message_id) provider_message_id, idx, status FROM (
             SELECT m.provider_message_id, m.idx, m.status, 1 AS rank FROM ${BULK_SCHEMA}.messages m
              WHERE m.provider_message_id = ANY($1::text[])
             UNION ALL
             SELECT r.provider_message_id, r.idx, 'sent', 2 FROM bulk_work.recipients r
              WHERE r.provider_message_id = ANY($1::text[])
                AND NOT EXISTS (SELECT 1 FROM bulk_work.outcome_batches b WHERE b.bulk_id = r.bulk_id AND r.idx = ANY(b.idxs))
           ) found ORDER BY provider_message_id, rank`,
    values: [ids],
  });
  return new Map(r.rows.map((row) => [row.provider_message_id, { index: row.idx, status: row.status }]));
}

function chunkOf(owner: ProviderMessageOwner): { bulkId: string; chunk: number } {
  const where = parseChunkStreamId(owner.streamId);
  if (!where) throw new Error(`not a bulk chunk stream: ${owner.streamId}`);
  return where;
}

/** The events of a notification's status changes, with ids derived from the notification (a redelivery is recognised). */
function statusEvents(
  services: Services,
  owner: ProviderMessageOwner,
  where: { bulkId: string; chunk: number },
  index: number,
  update: ProviderStatusUpdate,
  changes: ReturnType<typeof recipientStatusChanges>,
): EventToAppend[] {
  const identity = `${update.providerMessageId}:${update.status}:${update.timestamp}`;
  return changes.map((c, i) => {
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
  });
}
