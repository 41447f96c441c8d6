// The delivery consumer's per-record path: a status applied through its owner's applier, an inbound message recorded
// on its conversation; and the caches this path shares with the batch handler (delivery-batch-handler.ts).
import type { Services } from '../services';
import type { EventToAppend } from '../ports/event-store';
import { inboundProviderMessage } from '../commands/send/conversation';
import { conversationStreamId } from '../commands/conversation/decider';
import { deterministicUuid } from '../commands/send/ids';
import { type IncomingRecord, PoisonRecordError, type RecordHandler } from '../ports/transport';
import type { ProviderMessageOwner } from '../projections/sends/queries';
import { findContactForRecipient } from '../projections/sends/contacts';
import { findNumberByProviderId } from '../projections/sends/queries';
import { normalizePhone } from '../shared/phone';
import { hasUnstorableText } from '../shared/storable';
import { InvalidEventError } from '../events/registry';
import type { ProviderStatusUpdate, StatusApplier } from '../commands/delivery-status';
import { isObject, parseStatusRecord, tooDeepReason, unixToIso } from './delivery-status-parsing';
import { createOwnerFinder, PARK } from './provider-message-owners';
import { parkStatuses } from './parked-statuses';
import { createSendStatusApplier, createSendStreamCache, statusAppliers, statusIdentity } from './send-status-applier';

export interface DeliveryConsumerOptions {
  topic?: string;
  groupId?: string;
  /**
   * how long a status for an unknown provider message id waits for its owner before it is dead-lettered, counted
   * from when it was parked (or, without parking, first seen) (default 60 s)
   */
  ownerGraceMs?: number;
  /** how long one attempt waits in place for the owner to appear (default 500 ms) */
  ownerWaitMs?: number;
  /**
   * park a status whose owner is still unknown after `ownerWaitMs` in Postgres and move on (default: with the Kafka
   * transport, where retrying it in place would hold back its whole partition); else it is retried in place
   */
  parkUnknownOwners?: boolean;
  /** how often the parked-status sweeper looks at the parked statuses (default 1 s) */
  parkedSweepMs?: number;
  /** records of one partition handled at once on the per-record path; one message's statuses stay in order (default 16) */
  keyedConcurrency?: number;
  /** most records per batch (default 500; the transport's maxBatchRecords) */
  maxBatchRecords?: number;
}

/** What the per-record and the batch handlers share: caches, the owner lookup, the per-record handler. */
export function deliveryCore(services: Services, options: DeliveryConsumerOptions) {
  const parking = options.parkUnknownOwners ?? services.transport.kind === 'kafka';
  const { owners, firstSeen, findOwner } = createOwnerFinder(services, { ...options, park: parking });
  const sendCache = createSendStreamCache();
  const applySend = createSendStatusApplier({ cache: sendCache });
  const applierFor = (kind: string): StatusApplier | undefined => (kind === 'send' ? applySend : statusAppliers.get(kind));

  /** A status applied to its owner: the path of live records, and of parked ones once their owner is known. */
  const applyStatus = async (owner: ProviderMessageOwner, update: ProviderStatusUpdate) => {
    const apply = applierFor(owner.kind);
    if (!apply) throw new PoisonRecordError(`no status applier for provider messages of kind ${owner.kind}`);
    await apply(services, owner, update);
  };

  const onStatus = async (record: IncomingRecord, value: Record<string, any>) => {
    const update = parseStatusRecord(value);
    if (!update) return; // a status we do not track (e.g. deleted, warning)
    const owner = await findOwner(update);
    if (owner === PARK) {
      // in Postgres before the offset moves on; the sweeper applies it (in order) once the owner is known
      await parkStatuses(services.pool, [{ record, update }]);
      services.logger.info({ providerMessageId: update.providerMessageId, status: update.status }, 'provider status parked until its owner is known');
      return;
    }
    firstSeen.delete(statusIdentity(update));
    await applyStatus(owner, update);
  };

  const onMessage = async (value: Record<string, any>) => {
    const m = value.message;
    if (!isObject(m)) throw new PoisonRecordError('message record without a message object');
    if (typeof m.id !== 'string' || m.id === '') throw new PoisonRecordError('inbound message without an id');
    if (typeof m.from !== 'string' || !/^\+?\d{6,20}$/.test(m.from)) throw new PoisonRecordError(`inbound message ${m.id}: invalid sender`);
    if (typeof value.phoneNumberId !== 'string' || value.phoneNumberId === '') {
      throw new PoisonRecordError(`inbound message ${m.id}: no receiving phone_number_id`);
    }
    if (hasUnstorableText(m) || hasUnstorableText(value.phoneNumberId)) {
      throw new PoisonRecordError(`inbound message ${JSON.stringify(m.id)}: contains text that cannot be stored (U+0000 or an unpaired UTF-16 surrogate)`);
    }
    const { iso } = unixToIso(m.timestamp, `inbound message ${m.id}`);
    const number = await findNumberByProviderId(services.pool, value.phoneNumberId);
    if (!number) throw new PoisonRecordError(`inbound message ${m.id}: unknown phone_number_id ${value.phoneNumberId}`);
    const digits = m.from.replace(/^\+/, '');
    const contactE164 = normalizePhone(digits) ?? `+${digits}`;
    const contact = await findContactForRecipient(services.pool, number.companyId, contactE164);
    const data = inboundProviderMessage({
      companyId: number.companyId,
      phoneNumberId: value.phoneNumberId,
      contactE164,
      contactId: contact?.id ?? null,
      message: m,
      occurredAt: iso,
    });
    const event: EventToAppend = {
      type: 'MessageRecorded',
      data,
      metadata: {
        eventId: deterministicUuid('provider-inbound-message', `${number.companyId}:${m.id}`),
        correlationId: deterministicUuid('provider-inbound-correlation', `${number.companyId}:${m.id}`),
        causationId: null,
        companyId: number.companyId,
        actor: 'provider',
        at: services.now().toISOString(),
      },
    };
    const appended = await appendInbound(services, conversationStreamId(number.companyId, data.conversationId), event, `inbound message ${m.id}`);
    if (!appended.alreadyAppended) services.metrics.eventsAppended.labels('MessageRecorded').inc();
  };

  const handleRecord: RecordHandler = async (record) => {
    const value = record.value;
    if (!isObject(value)) throw new PoisonRecordError('record value is not a JSON object');
    const tooDeep = tooDeepReason(value);
    if (tooDeep !== null) throw new PoisonRecordError(tooDeep);
    if (value.kind === 'status') return onStatus(record, value);
    if (value.kind === 'message') return onMessage(value);
    throw new PoisonRecordError(`unknown record kind ${JSON.stringify(value.kind)}`);
  };

  return { owners, sendCache, handleRecord, applyStatus, parking };
}

/** Appends an inbound message; one its event schema refuses (checked before anything is written) is a poison record. */
async function appendInbound(services: Services, streamId: string, event: EventToAppend, what: string) {
  try {
    return await services.store.append(streamId, [event], 'any');
  } catch (err) {
    if (err instanceof InvalidEventError) throw new PoisonRecordError(`${what}: ${err.message}`);
    throw err;
  }
}
