// The delivery consumer (ARCHITECTURE section 7): takes the provider's notifications from `provider.webhooks`
// (consumer group `switchboard-delivery`) and
//  - applies each status to the send that owns the provider message id (owner index of the sends read model;
//    dispatch on the owner's `kind`, so bulk recipients can register their own applier). Statuses are
//    monotonic (the send decider); event ids are derived from the record (provider id + status + timestamp),
//    so a redelivered record is recognised. A status that arrives before the send's acceptance is projected
//    is waited for briefly in place (`ownerWaitMs`; with parking, one wait per consumer call for all its statuses
//    of unknown owners, then parked together). If its owner is still unknown then (a message sent from
//    another tool on the same number, say), with the Kafka transport it is PARKED: written to Postgres
//    (parked-statuses.ts) and counted as handled, so the partition moves on; a later status of a provider id
//    with parked statuses is parked after them (applied in order). The parked-status sweeper
//    (parked-status-sweeper.ts), started and stopped with the consumer, applies them once the owner is known,
//    or dead-letters them `ownerGraceMs` after they were parked (provider.webhooks.dlq, the same reason and
//    metrics). In-process (no partition to hold back), such a status is retried by the transport (transient
//    error) until `ownerGraceMs` after it was first seen, then dead-lettered (PoisonRecordError);
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
// (inbound messages, mixed kinds) goes through the per-record path, one record after the other; a lane with owners
// not known yet waits with the call's other such lanes, once, then is applied as any lane. A batch append refused
// for a revision or an event id (another consumer got there first) falls back to the per-record path, which
// recognises what is stored already.
import type { Services } from '../services';
import type { BatchHandler, IncomingRecord, RecordHandler, Subscription } from '../ports/transport';
import { PROVIDER_WEBHOOK_TOPIC } from '../shared/provider-webhook';
import { batchHandlerOver } from './delivery-batch-handler';
import { type DeliveryConsumerOptions, deliveryCore } from './delivery-record-handler';
import { startParkedStatusSweeper } from './parked-status-sweeper';

export { parseStatusRecord } from './delivery-status-parsing';
export type { DeliveryConsumerOptions } from './delivery-record-handler';
export { findProviderMessageOwners } from './provider-message-owners';
export { applySendStatus, createSendStatusApplier, createSendStreamCache, type SendStreamCache, statusAppliers } from './send-status-applier';

export const DELIVERY_GROUP_ID = 'switchboard-delivery';

/** The per-record handler: one record at a time (the transport's per-record contract). */
export function createDeliveryHandler(services: Services, options: DeliveryConsumerOptions = {}): RecordHandler {
  return deliveryCore(services, options).handleRecord;
}

/** The batch handler (see the header): an outcome per record, in record order. */
export function createDeliveryBatchHandler(services: Services, options: DeliveryConsumerOptions = {}): BatchHandler {
  return batchHandlerOver(services, options, deliveryCore(services, options));
}

export async function startDeliveryConsumer(services: Services, options: DeliveryConsumerOptions = {}): Promise<Subscription> {
  const topic = options.topic ?? PROVIDER_WEBHOOK_TOPIC;
  const core = deliveryCore(services, options); // one set of caches for both forms
  const onDeadLetter = (record: IncomingRecord, reason: string) => {
    services.metrics.deadLetters.labels(record.topic).inc();
    // not the record's key: an inbound message's is the sender's phone (docs/reliability.md, "What is logged")
    services.logger.warn({ topic: record.topic, partition: record.partition, offset: record.offset, ...identifying(record.value), reason }, 'provider notification dead-lettered');
  };
  const subscription = await services.transport.subscribe(topic, core.handleRecord, {
    groupId: options.groupId ?? DELIVERY_GROUP_ID,
    // a fetched partition batch at a time: one owner query, one stream read and one append per batch
    batchHandler: batchHandlerOver(services, options, core),
    maxBatchRecords: options.maxBatchRecords ?? 500,
    // statuses of different messages are independent; one message's statuses stay in order (key = provider id)
    keyedConcurrency: options.keyedConcurrency ?? 16,
    onDeadLetter,
  });
  if (!core.parking) return subscription;
  const sweeper = startParkedStatusSweeper(services, {
    topic,
    graceMs: options.ownerGraceMs ?? 60_000,
    intervalMs: options.parkedSweepMs ?? 1_000,
    apply: core.applyStatus,
    onDeadLetter,
  });
  return {
    async stop() {
      await Promise.all([subscription.stop(), sweeper.stop()]);
    },
  };
}

const LOGGED_TEXT_MAX = 200;
const loggedText = (v: unknown): string | undefined => (typeof v === 'string' ? v.slice(0, LOGGED_TEXT_MAX) : undefined);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What names a dead-lettered record in the log besides its coordinates (none in-process): its kind and the provider's
 * message id (a status's `id`, an inbound message's `id`). Never a phone: the sender, the recipient.
 */
function identifying(value: unknown): { kind: string; providerMessageId?: string } {
  if (!isObject(value)) return { kind: 'unknown' };
  const item = value.kind === 'status' ? value.status : value.kind === 'message' ? value.message : undefined;
  const kind = value.kind === 'status' || value.kind === 'message' ? value.kind : 'unknown';
  return { kind, providerMessageId: isObject(item) ? loggedText(item.id) : undefined };
}
