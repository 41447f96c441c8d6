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
//
// Batches (docs/sends.md, "Batched delivery consumer"): the consumer takes records through the transport's batch
// handler. Per batch: one owner query for the provider ids not cached yet (single sends and bulk recipients), one
// readStreams for the send streams not cached yet, every status decided in memory in record order, and one
// appendMany for all of them. Records are grouped in lanes (same key or same provider id); a lane made only of
// statuses of single sends with a known owner is batched, so is one made only of statuses of bulk recipients with
// a known owner (one query for their current statuses, one appendMany over their chunk streams); any other lane
// (inbound messages, owners not known yet, mixed kinds) goes through the per-record path, one record after the
// other. A batch append refused
// for a revision or an event id (another consumer got there first) falls back to the per-record path, which
// recognises what is stored already.
import type { Services } from '../services';
import { DomainError, fold } from '../commands/decider';
import { baseMetadata } from '../commands/handle';
import { inboundProviderMessage } from '../commands/send/conversation';
import { conversationStreamId } from '../commands/conversation/decider';
import { type ProviderStatus, type SendCommand, sendDecider, type SendState } from '../commands/send/decider';
import { deterministicUuid } from '../commands/send/ids';
import { reconcileSendFromStatus } from '../commands/send/reconcile';
import type { SendEvent } from '../events/sends';
import { DuplicateEventIdError, type EventToAppend, type StreamAppend, WrongExpectedRevisionError } from '../ports/event-store';
import {
  type BatchHandler,
  PoisonRecordError,
  type IncomingRecord,
  type RecordHandler,
  type RecordOutcome,
  type Subscription,
} from '../ports/transport';
import { findContactForRecipient } from '../projections/sends/contacts';
import { SENDS_SCHEMA } from '../projections/sends/projection';
import { findNumberByProviderId, findProviderMessageOwner, type ProviderMessageOwner } from '../projections/sends/queries';
import { normalizePhone } from '../shared/phone';
import { PROVIDER_WEBHOOK_TOPIC } from '../shared/provider-webhook';
// [bulk sends, issue 5] bulk recipients own provider message ids too: owner lookup and applier in src/commands/bulk/delivery.ts
import { applyBulkStatus, BULK_OWNERS_SELECT, bulkOwnerFromRow, decideBulkStatuses, findBulkMessageOwner } from '../commands/bulk/delivery';
import type { ProviderStatusUpdate, StatusApplier } from '../commands/delivery-status';

export const DELIVERY_GROUP_ID = 'switchboard-delivery';

/** [issue 16] A status naming a keyed send whose answer was never recorded records that answer (per-record path only). */
const reconciledOwner = (services: Services, update: ProviderStatusUpdate) =>
  update.clientReference === undefined
    ? undefined
    : reconcileSendFromStatus(services, {
      clientReference: update.clientReference,
      providerMessageId: update.providerMessageId,
      phoneNumberId: update.phoneNumberId ?? null,
      at: update.at,
    });

export interface DeliveryConsumerOptions {
  topic?: string;
  groupId?: string;
  /** how long a status for an unknown provider message id is retried before it is dead-lettered (default 60 s) */
  ownerGraceMs?: number;
  /** how long one attempt waits in place for the owner to appear (default 500 ms) */
  ownerWaitMs?: number;
  /** records of one partition handled at once on the per-record path; one message's statuses stay in order (default 16) */
  keyedConcurrency?: number;
  /** most records per batch (default 500; the transport's maxBatchRecords) */
  maxBatchRecords?: number;
}

/** A status as the consumer applies it. */

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
  const update: ProviderStatusUpdate = { providerMessageId: s.id, status: s.status as ProviderStatus, at: iso, timestamp: raw, errorCode, errorMessage };
  if (typeof s.biz_opaque_callback_data === 'string' && s.biz_opaque_callback_data !== '') update.clientReference = s.biz_opaque_callback_data;
  if (typeof value.phoneNumberId === 'string' && value.phoneNumberId !== '') update.phoneNumberId = value.phoneNumberId;
  return update;
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

/** Folded state and revision of recently touched send streams, shared by the batch and the per-record paths. */
export type SendStreamCache = Lru<string, { state: SendState; revision: bigint }>;

export function createSendStreamCache(size = 20_000): SendStreamCache {
  return new Lru(size);
}

const statusIdentity = (u: ProviderStatusUpdate) => `${u.providerMessageId}:${u.status}:${u.timestamp}`;

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
function statusEvents(owner: ProviderMessageOwner, update: ProviderStatusUpdate, events: SendEvent[], now: () => Date): EventToAppend[] {
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

function decideStatus(owner: ProviderMessageOwner, update: ProviderStatusUpdate, state: SendState): SendEvent[] {
  try {
    return sendDecider.decide(statusCommand(owner, update), state);
  } catch (err) {
    if (err instanceof DomainError) throw new PoisonRecordError(`status ${update.status} of ${update.providerMessageId}: ${err.message}`);
    throw err;
  }
}

function countAppended(services: Services, events: Array<{ type: string }>): void {
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

/** Owners of provider message ids, one query: the single sends' owner index and the bulk recipients. */
export async function findProviderMessageOwners(services: Services, ids: readonly string[]): Promise<Map<string, ProviderMessageOwner>> {
  const out = new Map<string, ProviderMessageOwner>();
  if (ids.length === 0) return out;
  const r = await services.pool.query<{
    provider_message_id: string; rank: number; kind: string; stream_id: string | null; company_id: number; bulk_id: string | null; chunk: number | null;
  }>(
    `SELECT provider_message_id, 0 AS rank, kind, stream_id, company_id, NULL::text AS bulk_id, NULL::int AS chunk
       FROM ${SENDS_SCHEMA}.provider_messages WHERE provider_message_id = ANY($1::text[])
     UNION ALL ${BULK_OWNERS_SELECT}
     ORDER BY rank`,
    [ids],
  );
  for (const row of r.rows) {
    if (out.has(row.provider_message_id)) continue; // the lowest rank wins
    out.set(
      row.provider_message_id,
      row.rank === 0
        ? { providerMessageId: row.provider_message_id, kind: row.kind, streamId: row.stream_id!, companyId: row.company_id }
        : bulkOwnerFromRow({ provider_message_id: row.provider_message_id, company_id: row.company_id, bulk_id: row.bulk_id!, chunk: row.chunk! }),
    );
  }
  return out;
}

/** What the per-record and the batch handlers share: caches, the owner lookup, the per-record handler. */
function deliveryCore(services: Services, options: DeliveryConsumerOptions) {
  const graceMs = options.ownerGraceMs ?? 60_000;
  const waitMs = options.ownerWaitMs ?? 500;
  const firstSeen = new Map<string, number>();
  const owners = new Lru<string, ProviderMessageOwner>(50_000); // an owner never changes once recorded
  const sendCache = createSendStreamCache();
  const applySend = createSendStatusApplier({ cache: sendCache });
  const applierFor = (kind: string): StatusApplier | undefined => (kind === 'send' ? applySend : statusAppliers.get(kind));

  const findOwner = async (update: ProviderStatusUpdate): Promise<ProviderMessageOwner> => {
    const known = owners.get(update.providerMessageId);
    if (known) return known;
    const started = Date.now();
    for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
      const owner = (await findProviderMessageOwner(services.pool, update.providerMessageId))
        ?? (await findBulkMessageOwner(services.pool, update.providerMessageId)) // [bulk sends, issue 5]
        ?? (await reconciledOwner(services, update)); // [issue 16]
      if (owner) {
        owners.set(update.providerMessageId, owner);
        return owner;
      }
      if (Date.now() - started >= waitMs) break;
      await sleep(Math.min(delay, Math.max(0, waitMs - (Date.now() - started))));
    }
    const identity = statusIdentity(update);
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
    firstSeen.delete(statusIdentity(update));
    const apply = applierFor(owner.kind);
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

  const handleRecord: RecordHandler = async (record) => {
    const value = record.value;
    if (!isObject(value)) throw new PoisonRecordError('record value is not a JSON object');
    if (value.kind === 'status') return onStatus(value);
    if (value.kind === 'message') return onMessage(value);
    throw new PoisonRecordError(`unknown record kind ${JSON.stringify(value.kind)}`);
  };

  return { owners, sendCache, handleRecord };
}

/** The per-record handler: one record at a time (the transport's per-record contract). */
export function createDeliveryHandler(services: Services, options: DeliveryConsumerOptions = {}): RecordHandler {
  return deliveryCore(services, options).handleRecord;
}

/** The batch handler (see the header): an outcome per record, in record order. */
export function createDeliveryBatchHandler(services: Services, options: DeliveryConsumerOptions = {}): BatchHandler {
  return batchHandlerOver(services, options, deliveryCore(services, options));
}

const poison = (reason: string): RecordOutcome => ({ kind: 'poison', reason });
const OK: RecordOutcome = { kind: 'ok' };

/** Runs `fn` over `items` with at most `limit` at once. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
}

function batchHandlerOver(services: Services, options: DeliveryConsumerOptions, core: ReturnType<typeof deliveryCore>): BatchHandler {
  const { owners, sendCache, handleRecord } = core;
  const concurrency = options.keyedConcurrency ?? 16;

  /** Per-record path over lanes: lanes at once, a lane's records one after the other; a transient failure stops its lane. */
  const runLanes = async (records: IncomingRecord[], lanes: number[][], outcomes: Array<RecordOutcome | undefined>) => {
    await eachLimited(lanes, concurrency, async (lane) => {
      for (let k = 0; k < lane.length; k++) {
        const i = lane[k];
        try {
          await handleRecord(records[i]);
          outcomes[i] = OK;
        } catch (err) {
          if (err instanceof PoisonRecordError || (err instanceof Error && err.name === 'PoisonRecordError')) {
            outcomes[i] = poison((err as PoisonRecordError).reason || err.message);
            continue;
          }
          // not applied: neither is the rest of the lane (its order is kept)
          for (const j of lane.slice(k)) outcomes[j] = { kind: 'retry', error: err };
          return;
        }
      }
    });
  };

  interface SendItem {
    i: number;
    update: ProviderStatusUpdate;
    owner: ProviderMessageOwner;
  }

  /** Batched path: statuses of single sends with known owners, lanes given in record order. */
  const applyBatched = async (records: IncomingRecord[], lanes: number[][], items: Map<number, SendItem>, outcomes: Array<RecordOutcome | undefined>) => {
    const ordered = lanes.flat().sort((a, b) => a - b).map((i) => items.get(i)!);
    // each stream's state: cached, else read (one query for all the streams not cached)
    const base = new Map<string, { state: SendState; revision: bigint } | undefined>();
    for (const x of ordered) if (!base.has(x.owner.streamId)) base.set(x.owner.streamId, sendCache.get(x.owner.streamId));
    const uncached = [...base].filter(([, entry]) => !entry).map(([id]) => id);
    if (uncached.length > 0) {
      try {
        for (const [id, stored] of await services.store.readStreams(uncached)) {
          if (stored.length === 0) continue; // stays undefined: poison below
          base.set(id, {
            state: fold(sendDecider, stored.map((e) => ({ type: e.type, data: e.data }) as SendEvent)),
            revision: stored[stored.length - 1].revision,
          });
        }
      } catch (err) {
        for (const x of ordered) outcomes[x.i] = { kind: 'retry', error: err };
        return;
      }
    }
    const work = new Map<string, { state: SendState; revision: bigint; decided: SendEvent[]; events: EventToAppend[] }>();
    for (const { i, update, owner } of ordered) {
      let w = work.get(owner.streamId);
      if (!w) {
        const entry = base.get(owner.streamId);
        if (!entry) {
          outcomes[i] = poison(`send stream ${owner.streamId} is empty`);
          continue;
        }
        w = { state: entry.state, revision: entry.revision, decided: [], events: [] };
        work.set(owner.streamId, w);
      }
      let events: SendEvent[];
      try {
        events = decideStatus(owner, update, w.state);
      } catch (err) {
        if (!(err instanceof PoisonRecordError)) throw err;
        outcomes[i] = poison(err.reason);
        continue;
      }
      outcomes[i] = OK;
      if (events.length === 0) continue;
      w.state = events.reduce(sendDecider.evolve, w.state);
      w.decided.push(...events);
      w.events.push(...statusEvents(owner, update, events, services.now));
    }
    const appends: StreamAppend[] = [];
    const decided: SendEvent[][] = [];
    for (const [streamId, w] of work) {
      if (w.events.length === 0) {
        sendCache.set(streamId, { state: w.state, revision: w.revision }); // nothing to do: keep what was read
        continue;
      }
      appends.push({ streamId, events: w.events, expected: w.revision });
      decided.push(w.decided);
    }
    if (appends.length === 0) return;
    let results;
    try {
      results = await services.store.appendMany(appends);
    } catch (err) {
      for (const a of appends) sendCache.delete(a.streamId);
      if (err instanceof WrongExpectedRevisionError || err instanceof DuplicateEventIdError) {
        // another writer got to one of these streams: each status on its own, recognising what is stored already
        services.logger.debug({ err: (err as Error).message, statuses: ordered.length }, 'batched statuses conflict; applying them one by one');
        for (const x of ordered) outcomes[x.i] = undefined;
        await runLanes(records, lanes, outcomes);
        return;
      }
      for (const x of ordered) outcomes[x.i] = { kind: 'retry', error: err };
      return;
    }
    results.forEach((result, k) => {
      const { streamId } = appends[k];
      if (result.alreadyAppended) {
        sendCache.delete(streamId); // says nothing about the revision: reload next time
        return;
      }
      countAppended(services, decided[k]);
      sendCache.set(streamId, { state: work.get(streamId)!.state, revision: result.nextRevision });
    });
  };

  /**
   * Batched path for bulk recipients: statuses of known owners decided in record order on the recipients' current
   * statuses, one appendMany over their chunk streams. A lane with a recipient found nowhere, or a refused
   * append, goes record by record.
   */
  const applyBulkBatched = async (records: IncomingRecord[], lanes: number[][], items: Map<number, SendItem>, outcomes: Array<RecordOutcome | undefined>) => {
    let decided: Awaited<ReturnType<typeof decideBulkStatuses>>;
    const all = lanes.flat().sort((a, b) => a - b);
    try {
      decided = await decideBulkStatuses(services, all.map((i) => items.get(i)!));
    } catch (err) {
      for (const i of all) outcomes[i] = { kind: 'retry', error: err };
      return;
    }
    if (decided.missing.size > 0) {
      const hasMissing = (lane: number[]) => lane.some((i) => decided.missing.has(items.get(i)!.update.providerMessageId));
      const [batched, single] = [lanes.filter((l) => !hasMissing(l)), lanes.filter(hasMissing)];
      await Promise.all([runLanes(records, single, outcomes), batched.length > 0 ? applyBulkBatched(records, batched, items, outcomes) : undefined]);
      return;
    }
    try {
      if (decided.appends.length > 0) await services.store.appendMany(decided.appends);
      for (const i of all) outcomes[i] = OK;
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError || err instanceof DuplicateEventIdError) {
        services.logger.debug({ err: (err as Error).message, statuses: all.length }, 'batched bulk statuses conflict; applying them one by one');
        await runLanes(records, lanes, outcomes);
        return;
      }
      for (const i of all) outcomes[i] = { kind: 'retry', error: err };
    }
  };

  return async (records) => {
    const outcomes: Array<RecordOutcome | undefined> = new Array(records.length);
    const updates = new Map<number, ProviderStatusUpdate>();
    records.forEach((record, i) => {
      const value = record.value;
      if (!isObject(value)) outcomes[i] = poison('record value is not a JSON object');
      else if (value.kind === 'message') return; // record by record (its lane is not batched)
      else if (value.kind !== 'status') outcomes[i] = poison(`unknown record kind ${JSON.stringify(value.kind)}`);
      else {
        try {
          const update = parseStatusRecord(value);
          if (update) updates.set(i, update);
          else outcomes[i] = OK; // a status we do not track (e.g. deleted, warning)
        } catch (err) {
          if (!(err instanceof PoisonRecordError)) throw err;
          outcomes[i] = poison(err.reason);
        }
      }
    });

    // one owner query for the provider ids not cached yet
    const unknownIds = [...new Set([...updates.values()].map((u) => u.providerMessageId).filter((id) => !owners.get(id)))];
    if (unknownIds.length > 0) for (const [id, owner] of await findProviderMessageOwners(services, unknownIds)) owners.set(id, owner);

    // lanes: records sharing a key or a provider message id (union-find over both)
    const parent = new Map<string, string>();
    const find = (x: string): string => {
      let root = x;
      while (parent.get(root) !== root) root = parent.get(root)!;
      for (let y = x; y !== root; ) {
        const up = parent.get(y)!;
        parent.set(y, root);
        y = up;
      }
      return root;
    };
    const tokens = records.map((record, i) => {
      const t = [`k:${record.key ?? `offset:${record.offset ?? i}`}`];
      const u = updates.get(i);
      if (u) t.push(`p:${u.providerMessageId}`);
      for (const x of t) if (!parent.has(x)) parent.set(x, x);
      for (let j = 1; j < t.length; j++) {
        const a = find(t[0]);
        const b = find(t[j]);
        if (a !== b) parent.set(b, a);
      }
      return t[0];
    });
    const lanes = new Map<string, number[]>();
    records.forEach((_, i) => {
      const root = find(tokens[i]);
      const lane = lanes.get(root);
      if (lane) lane.push(i);
      else lanes.set(root, [i]);
    });

    // a lane of statuses with known owners of one kind (single sends, or bulk recipients) is batched; any other
    // lane goes record by record
    const batchedLanes: number[][] = [];
    const bulkLanes: number[][] = [];
    const perRecordLanes: number[][] = [];
    const items = new Map<number, SendItem>();
    for (const lane of lanes.values()) {
      const open = lane.filter((i) => outcomes[i] === undefined);
      if (open.length === 0) continue;
      let kind: string | undefined;
      for (const i of open) {
        const update = updates.get(i);
        const owner = update && owners.get(update.providerMessageId);
        if (!update || !owner || (owner.kind !== 'send' && owner.kind !== 'bulk') || (kind !== undefined && owner.kind !== kind)) {
          kind = undefined;
          break;
        }
        kind = owner.kind;
        items.set(i, { i, update, owner });
      }
      (kind === 'send' ? batchedLanes : kind === 'bulk' ? bulkLanes : perRecordLanes).push(open);
    }

    await Promise.all([
      batchedLanes.length > 0 ? applyBatched(records, batchedLanes, items, outcomes) : undefined,
      bulkLanes.length > 0 ? applyBulkBatched(records, bulkLanes, items, outcomes) : undefined,
      perRecordLanes.length > 0 ? runLanes(records, perRecordLanes, outcomes) : undefined,
    ]);

    // per-key order: after a record to retry, nothing of its lane counts as done
    for (const lane of lanes.values()) {
      const first = lane.findIndex((i) => outcomes[i]?.kind === 'retry');
      if (first < 0) continue;
      const failure = outcomes[lane[first]] as Extract<RecordOutcome, { kind: 'retry' }>;
      for (const i of lane.slice(first + 1)) if (outcomes[i]?.kind !== 'retry') outcomes[i] = { kind: 'retry', error: failure.error };
    }
    return outcomes.map((o) => o ?? { kind: 'retry', error: new Error('record left without an outcome') });
  };
}

export async function startDeliveryConsumer(services: Services, options: DeliveryConsumerOptions = {}): Promise<Subscription> {
  const topic = options.topic ?? PROVIDER_WEBHOOK_TOPIC;
  const core = deliveryCore(services, options); // one set of caches for both forms
  return services.transport.subscribe(topic, core.handleRecord, {
    groupId: options.groupId ?? DELIVERY_GROUP_ID,
    // a fetched partition batch at a time: one owner query, one stream read and one append per batch
    batchHandler: batchHandlerOver(services, options, core),
    maxBatchRecords: options.maxBatchRecords ?? 500,
    // statuses of different messages are independent; one message's statuses stay in order (key = provider id)
    keyedConcurrency: options.keyedConcurrency ?? 16,
    onDeadLetter: (record, reason) => {
      services.metrics.deadLetters.labels(record.topic).inc();
      services.logger.warn({ topic: record.topic, key: record.key, partition: record.partition, offset: record.offset, reason }, 'provider notification dead-lettered');
    },
  });
}
