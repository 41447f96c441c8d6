// The delivery consumer (ARCHITECTURE section 7): takes the provider's notifications from `provider.webhooks`
// (consumer group `switchboard-delivery`) and
//  - applies each status to the send that owns the provider message id (owner index of the sends read model;
//    dispatch on the owner's `kind`, so bulk recipients can register their own applier). Statuses are
//    monotonic (the send decider); event ids are derived from the record (provider id + status + timestamp),
//    so a redelivered record is recognised. A status that arrives before the send's acceptance is projected
//    is waited for briefly in place, then retried by the transport (transient error) until `ownerGraceMs`
//    after it was first seen; after that it is dead-lettered (PoisonRecordError → provider.webhooks.dlq);
//  - records each inbound message as MessageRecorded (direction inbound, channel PROVIDER_MSGAPP, author the
//    contact matched by phone variants) on `conversation-{companyId}-msgapp-{phone_number_id}-{from}`.
// Malformed records and records that can never apply go to the DLQ with the reason, never block a partition.
import type { Services } from '../services';
import { DomainError, fold } from '../commands/decider';
import { baseMetadata } from '../commands/handle';
import { conversationStreamId, inboundProviderMessage } from '../commands/send/conversation';
import { type ProviderStatus, type SendCommand, sendDecider, type SendState } from '../commands/send/decider';
import { deterministicUuid } from '../commands/send/ids';
import type { SendEvent } from '../events/sends';
import { WrongExpectedRevisionError } from '../ports/event-store';
import { PoisonRecordError, type IncomingRecord, type RecordHandler, type Subscription } from '../ports/transport';
import { findContactForRecipient } from '../projections/sends/contacts';
import { findNumberByProviderId, findProviderMessageOwner, type ProviderMessageOwner } from '../projections/sends/queries';
import { normalizePhone } from '../shared/phone';
import { PROVIDER_WEBHOOK_TOPIC } from '../shared/provider-webhook';
// [bulk sends, issue 5] bulk recipients own provider message ids too: owner lookup and applier in src/commands/bulk/delivery.ts
import { applyBulkStatus, findBulkMessageOwner } from '../commands/bulk/delivery';

export const DELIVERY_GROUP_ID = 'switchboard-delivery';

export interface DeliveryConsumerOptions {
  topic?: string;
  groupId?: string;
  /** how long a status for an unknown provider message id is retried before it is dead-lettered (default 60 s) */
  ownerGraceMs?: number;
  /** how long one attempt waits in place for the owner to appear (default 500 ms) */
  ownerWaitMs?: number;
  /** records of one partition handled at once; one message's statuses stay in order (default 16) */
  keyedConcurrency?: number;
}

/** A status as the consumer applies it. */
export interface ProviderStatusUpdate {
  providerMessageId: string;
  status: ProviderStatus;
  /** ISO 8601, the provider's timestamp */
  at: string;
  /** unix seconds as sent (part of the deterministic event id) */
  timestamp: string;
  errorCode: string | null;
  errorMessage: string | null;
}

export type StatusApplier = (services: Services, owner: ProviderMessageOwner, update: ProviderStatusUpdate) => Promise<void>;

/** Appliers by owner kind. Bulk recipients register theirs (kind 'bulk') from their own module. */
export const statusAppliers = new Map<string, StatusApplier>();

class OwnerNotYetKnownError extends Error {
  override name = 'OwnerNotYetKnownError';
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const isObject = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);
const STATUSES = new Set<ProviderStatus>(['sent', 'delivered', 'read', 'failed']);
const MAX_TRACKED = 100_000;

function unixToIso(ts: unknown, what: string): { iso: string; raw: string } {
  const raw = typeof ts === 'number' ? String(ts) : typeof ts === 'string' ? ts.trim() : '';
  if (!/^\d{1,12}$/.test(raw)) throw new PoisonRecordError(`${what}: timestamp must be unix seconds, got ${JSON.stringify(ts)}`);
  return { iso: new Date(Number(raw) * 1000).toISOString(), raw };
}

/** Parses a status record; throws PoisonRecordError when it is malformed; null for statuses we do not track. */
export function parseStatusRecord(value: Record<string, any>): ProviderStatusUpdate | null {
  const s = value.status;
  if (!isObject(s)) throw new PoisonRecordError('status record without a status object');
  if (typeof s.id !== 'string' || s.id === '') throw new PoisonRecordError('status without a provider message id');
  if (typeof s.status !== 'string') throw new PoisonRecordError(`status of ${s.id} has no status name`);
  if (!STATUSES.has(s.status as ProviderStatus)) return null;
  const { iso, raw } = unixToIso(s.timestamp, `status ${s.status} of ${s.id}`);
  let errorCode: string | null = null;
  let errorMessage: string | null = null;
  if (s.status === 'failed') {
    const e = Array.isArray(s.errors) && isObject(s.errors[0]) ? s.errors[0] : {};
    errorCode = e.code === undefined || e.code === null ? null : String(e.code);
    const details = isObject(e.error_data) && typeof e.error_data.details === 'string' ? e.error_data.details : null;
    errorMessage = details ?? (typeof e.message === 'string' ? e.message : null) ?? (typeof e.title === 'string' ? e.title : null);
  }
  return { providerMessageId: s.id, status: s.status as ProviderStatus, at: iso, timestamp: raw, errorCode, errorMessage };
}

/** A bounded map that forgets the least recently used entries. */
class Lru<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly max: number) {}
  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }
  delete(key: K): void {
    this.map.delete(key);
  }
}

/**
 * The single-send applier: the send decider keeps statuses monotonic; event ids derived from the record make a
 * redelivery a no-op. The folded state and revision of recently touched send streams are cached (a send gets
 * two or three statuses, all on one partition, so one consumer): the append's expected revision catches a
 * stale entry (another consumer appended meanwhile), which is then reloaded.
 */
export function createSendStatusApplier(options: { cacheSize?: number } = {}): StatusApplier {
  const cache = new Lru<string, { state: SendState; revision: bigint }>(options.cacheSize ?? 20_000);
  return async (services, owner, update) => {
    const sendId = owner.streamId.replace(/^send-/, '');
    const identity = `${update.providerMessageId}:${update.status}:${update.timestamp}`;
    const command: SendCommand = {
      type: 'RecordDeliveryStatus',
      data: {
        sendId,
        providerMessageId: update.providerMessageId,
        status: update.status,
        at: update.at,
        errorCode: update.errorCode,
        errorMessage: update.errorMessage,
      },
    };
    const ctx = {
      actor: 'provider',
      companyId: owner.companyId,
      correlationId: deterministicUuid('provider-status-correlation', identity),
      now: services.now,
    };
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
      let events: SendEvent[];
      try {
        events = sendDecider.decide(command, entry.state);
      } catch (err) {
        if (err instanceof DomainError) throw new PoisonRecordError(`status ${update.status} of ${update.providerMessageId}: ${err.message}`);
        throw err;
      }
      if (events.length === 0) {
        cache.set(owner.streamId, entry);
        return;
      }
      const metadata = baseMetadata(ctx);
      try {
        const result = await services.store.append(
          owner.streamId,
          events.map((e, i) => ({
            type: e.type,
            data: e.data,
            metadata: { ...metadata, eventId: deterministicUuid('provider-status', `${identity}:${i}:${e.type}`) },
          })),
          entry.revision,
        );
        const state = events.reduce(sendDecider.evolve, entry.state);
        if (!result.alreadyAppended) for (const e of events) services.metrics.eventsAppended.labels(e.type).inc();
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

export function createDeliveryHandler(services: Services, options: DeliveryConsumerOptions = {}): RecordHandler {
  const graceMs = options.ownerGraceMs ?? 60_000;
  const waitMs = options.ownerWaitMs ?? 500;
  const firstSeen = new Map<string, number>();

  const owners = new Lru<string, ProviderMessageOwner>(50_000); // an owner never changes once recorded

  const findOwner = async (update: ProviderStatusUpdate): Promise<ProviderMessageOwner> => {
    const known = owners.get(update.providerMessageId);
    if (known) return known;
    const started = Date.now();
    for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
      const owner = (await findProviderMessageOwner(services.pool, update.providerMessageId))
        ?? (await findBulkMessageOwner(services.pool, update.providerMessageId)); // [bulk sends, issue 5]
      if (owner) {
        owners.set(update.providerMessageId, owner);
        return owner;
      }
      if (Date.now() - started >= waitMs) break;
      await sleep(Math.min(delay, Math.max(0, waitMs - (Date.now() - started))));
    }
    const identity = `${update.providerMessageId}:${update.status}:${update.timestamp}`;
    const first = firstSeen.get(identity) ?? started;
    if (!firstSeen.has(identity)) {
      if (firstSeen.size >= MAX_TRACKED) firstSeen.delete(firstSeen.keys().next().value!);
      firstSeen.set(identity, first);
    }
    if (Date.now() - first >= graceMs) {
      firstSeen.delete(identity);
      throw new PoisonRecordError(`unknown provider message id ${update.providerMessageId} (status ${update.status}) after ${graceMs} ms`);
    }
    throw new OwnerNotYetKnownError(`no send owns provider message id ${update.providerMessageId} yet`);
  };

  const onStatus = async (value: Record<string, any>) => {
    const update = parseStatusRecord(value);
    if (!update) return; // a status we do not track (e.g. deleted, warning)
    const owner = await findOwner(update);
    firstSeen.delete(`${update.providerMessageId}:${update.status}:${update.timestamp}`);
    const apply = statusAppliers.get(owner.kind);
    if (!apply) throw new PoisonRecordError(`no status applier for provider messages of kind ${owner.kind}`);
    await apply(services, owner, update);
  };

  const onMessage = async (value: Record<string, any>) => {
    const m = value.message;
    if (!isObject(m)) throw new PoisonRecordError('message record without a message object');
    if (typeof m.id !== 'string' || m.id === '') throw new PoisonRecordError('inbound message without an id');
    if (typeof m.from !== 'string' || !/^\+?\d{6,20}$/.test(m.from)) throw new PoisonRecordError(`inbound message ${m.id}: invalid sender`);
    if (typeof value.phoneNumberId !== 'string' || value.phoneNumberId === '') {
      throw new PoisonRecordError(`inbound message ${m.id}: no receiving phone_number_id`);
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
    const appended = await services.store.append(
      conversationStreamId(number.companyId, data.conversationId),
      [{
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
      }],
      'any',
    );
    if (!appended.alreadyAppended) services.metrics.eventsAppended.labels('MessageRecorded').inc();
  };

  return async (record: IncomingRecord) => {
    const value = record.value;
    if (!isObject(value)) throw new PoisonRecordError('record value is not a JSON object');
    if (value.kind === 'status') return onStatus(value);
    if (value.kind === 'message') return onMessage(value);
    throw new PoisonRecordError(`unknown record kind ${JSON.stringify(value.kind)}`);
  };
}

export async function startDeliveryConsumer(services: Services, options: DeliveryConsumerOptions = {}): Promise<Subscription> {
  const topic = options.topic ?? PROVIDER_WEBHOOK_TOPIC;
  return services.transport.subscribe(topic, createDeliveryHandler(services, options), {
    groupId: options.groupId ?? DELIVERY_GROUP_ID,
    // statuses of different messages are independent; one message's statuses stay in order (key = provider id)
    keyedConcurrency: options.keyedConcurrency ?? 16,
    onDeadLetter: (record, reason) => {
      services.metrics.deadLetters.labels(record.topic).inc();
      services.logger.warn({ topic: record.topic, key: record.key, partition: record.partition, offset: record.offset, reason }, 'provider notification dead-lettered');
    },
  });
}
