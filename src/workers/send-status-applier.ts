// Applying one provider status to a single send (the send decider, deterministic event ids, a cache of folded send
// streams), the pieces the batch handler reuses for that, and the registry of status appliers by owner kind.
import type { Services } from '../services';
import { DomainError, fold } from '../commands/decider';
import { baseMetadata } from '../commands/handle';
import { type SendCommand, sendDecider, type SendState } from '../commands/send/decider';
import { deterministicUuid } from '../commands/send/ids';
import type { SendEvent } from '../events/sends';
import { type EventToAppend, WrongExpectedRevisionError } from '../ports/event-store';
import { PoisonRecordError } from '../ports/transport';
import type { ProviderMessageOwner } from '../projections/sends/queries';
// [bulk sends, issue 5] bulk recipients own provider message ids too: owner lookup and applier in src/commands/bulk/delivery.ts
import { applyBulkStatus } from '../commands/bulk/delivery';
import type { ProviderStatusUpdate, StatusApplier } from '../commands/delivery-status';
import { Lru } from '../shared/lru';

/** Appliers by owner kind. Bulk recipients register theirs (kind 'bulk') from their own module. */
export const statusAppliers = new Map<string, StatusApplier>();

/** Folded state and revision of recently touched send streams, shared by the batch and the per-record paths. */
export type SendStreamCache = Lru<string, { state: SendState; revision: bigint }>;

export function createSendStreamCache(size = 20_000): SendStreamCache {
  return new Lru(size);
}

export const statusIdentity = (u: ProviderStatusUpdate) => `${u.providerMessageId}:${u.status}:${u.timestamp}`;

function statusCommand(owner: ProviderMessageOwner, update: ProviderStatusUpdate): SendCommand {
  return {
    type: 'RecordDeliveryStatus',
    data: {
      sendId: owner.streamId.replace(/^send-/, ''),
      providerMessageId: update.providerMessageId,
      status: update.status,
      at: update.at,
      errorCode: update.errorCode,
      errorMessage: update.errorMessage,
    },
  };
}

/** The events of one status with their deterministic ids (a redelivered record gets the same ids). */
export function statusEvents(owner: ProviderMessageOwner, update: ProviderStatusUpdate, events: SendEvent[], now: () => Date): EventToAppend[] {
  const identity = statusIdentity(update);
  const metadata = baseMetadata({
    actor: 'provider',
    companyId: owner.companyId,
    correlationId: deterministicUuid('provider-status-correlation', identity),
    now,
  });
  return events.map((e, i) => ({
    type: e.type,
    data: e.data,
    metadata: { ...metadata, eventId: deterministicUuid('provider-status', `${identity}:${i}:${e.type}`) },
  }));
}

export function decideStatus(owner: ProviderMessageOwner, update: ProviderStatusUpdate, state: SendState): SendEvent[] {
  try {
    return sendDecider.decide(statusCommand(owner, update), state);
  } catch (err) {
    if (err instanceof DomainError) throw new PoisonRecordError(`status ${update.status} of ${update.providerMessageId}: ${err.message}`);
    throw err;
  }
}

export function countAppended(services: Services, events: Array<{ type: string }>): void {
  const byType = new Map<string, number>();
  for (const e of events) byType.set(e.type, (byType.get(e.type) ?? 0) + 1);
  for (const [type, n] of byType) services.metrics.eventsAppended.labels(type).inc(n);
}

/**
 * The single-send applier: the send decider keeps statuses monotonic; event ids derived from the record make a
 * redelivery a no-op. The folded state and revision of recently touched send streams are cached (a send gets
 * two or three statuses, all on one partition, so one consumer): the append's expected revision catches a
 * stale entry (another consumer appended meanwhile), which is then reloaded.
 */
export function createSendStatusApplier(options: { cacheSize?: number; cache?: SendStreamCache } = {}): StatusApplier {
  const cache = options.cache ?? createSendStreamCache(options.cacheSize);
  return async (services, owner, update) => {
    for (let attempt = 0; ; attempt++) {
      let entry = cache.get(owner.streamId);
      if (!entry) {
        const stored = await services.store.readStream(owner.streamId);
        if (stored.length === 0) throw new PoisonRecordError(`send stream ${owner.streamId} is empty`);
        entry = {
          state: fold(sendDecider, stored.map((e) => ({ type: e.type, data: e.data }) as SendEvent)),
          revision: stored[stored.length - 1].revision,
        };
      }
      const events = decideStatus(owner, update, entry.state);
      if (events.length === 0) {
        cache.set(owner.streamId, entry);
        return;
      }
      try {
        const result = await services.store.append(owner.streamId, statusEvents(owner, update, events, services.now), entry.revision);
        const state = events.reduce(sendDecider.evolve, entry.state);
        if (!result.alreadyAppended) countAppended(services, events);
        // an append recognised as already stored says nothing about the revision: reload next time
        if (result.alreadyAppended) cache.delete(owner.streamId);
        else cache.set(owner.streamId, { state, revision: result.nextRevision });
        return;
      } catch (err) {
        cache.delete(owner.streamId);
        if (err instanceof WrongExpectedRevisionError && attempt < 10) continue;
        throw err;
      }
    }
  };
}

export const applySendStatus: StatusApplier = createSendStatusApplier();
statusAppliers.set('send', applySendStatus);
statusAppliers.set('bulk', applyBulkStatus); // [bulk sends, issue 5]
