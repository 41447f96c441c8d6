// Reconciliation of a keyed send from a provider status (docs/sends.md, "Idempotent sends"). A keyed send records
// its request before calling the provider and gives the provider its send id as the client reference; if the
// process died before the answer was recorded, the provider's status for the message arrives for a provider id no
// send owns, with that reference (`biz_opaque_callback_data`). The acceptance the process never recorded is
// recorded here, as the send path would have: TemplateSendAccepted and the chat history's outbound message.
import type { Services } from '../../services';
import { WrongExpectedRevisionError } from '../../ports/event-store';
import type { SendEvent } from '../../events/sends';
import { outboundTemplateMessage } from '../../events/template-messages';
import type { ProviderMessageOwner } from '../../projections/sends/queries';
import { conversationStreamId } from '../conversation/decider';
import { fold } from '../decider';
import { baseMetadata } from '../handle';
import { sendDecider, sendStreamId } from './decider';
import { deterministicUuid } from './ids';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface StatusReference {
  /** the status's `biz_opaque_callback_data` */
  clientReference: string;
  providerMessageId: string;
  /** the number the webhook was for (metadata.phone_number_id); null when the webhook did not say */
  phoneNumberId: string | null;
  /** ISO 8601, the status's time: when the provider had accepted the message at the latest */
  at: string;
}

/**
 * The owner of the status's provider id once the send its reference names has the acceptance: recorded here when
 * the send holds a request without an answer (of the same number), or already recorded with this provider id.
 * Undefined when the reference names no such send (the status then takes the unknown-owner path).
 */
export async function reconcileSendFromStatus(services: Services, ref: StatusReference): Promise<ProviderMessageOwner | undefined> {
  if (!UUID.test(ref.clientReference)) return undefined;
  const streamId = sendStreamId(ref.clientReference);
  for (let attempt = 0; attempt < 5; attempt++) {
    const stored = await services.store.readStream(streamId);
    if (stored.length === 0) return undefined;
    const state = fold(sendDecider, stored.map((e) => ({ type: e.type, data: e.data }) as SendEvent));
    if (state.kind === 'accepted') return state.providerMessageId === ref.providerMessageId ? ownerOf(state.request, ref, streamId) : undefined;
    if (state.kind !== 'requested') return undefined; // refused or recorded interrupted: nothing to reconcile
    const request = state.request;
    if (ref.phoneNumberId !== null && ref.phoneNumberId !== request.phoneNumberId) return undefined;
    const decided = sendDecider.decide({ type: 'RecordSendAccepted', data: { sendId: request.sendId, providerMessageId: ref.providerMessageId, at: ref.at } }, state);
    const metadata = baseMetadata({
      actor: 'provider',
      companyId: request.companyId,
      correlationId: stored[0].metadata.correlationId ?? request.sendId,
      now: services.now,
    });
    const outbound = outboundTemplateMessage({
      companyId: request.companyId,
      phoneNumberId: request.phoneNumberId,
      templateName: request.templateName,
      language: request.language,
      recipientE164: request.recipientE164,
      variables: request.variables,
      providerMessageId: ref.providerMessageId,
      at: ref.at,
    });
    try {
      const [sent, recorded] = await services.store.appendMany([
        {
          streamId,
          events: decided.map((e, i) => ({
            type: e.type,
            data: e.data,
            metadata: { ...metadata, eventId: deterministicUuid('send-reconciled', `${request.sendId}:${ref.providerMessageId}:${i}`) },
          })),
          expected: stored[stored.length - 1].revision,
        },
        {
          streamId: conversationStreamId(request.companyId, outbound.conversationId),
          // the event id the send path gives its outbound message: whichever records it first, it is recorded once
          events: [{ type: 'MessageRecorded', data: outbound, metadata: { ...metadata, eventId: deterministicUuid('send-outbound-message', request.sendId) } }],
          expected: 'any',
        },
      ]);
      if (!sent.alreadyAppended) for (const e of decided) services.metrics.eventsAppended.labels(e.type).inc();
      if (!recorded.alreadyAppended) services.metrics.eventsAppended.labels('MessageRecorded').inc();
      services.logger.info({ sendId: request.sendId, providerMessageId: ref.providerMessageId }, 'keyed send reconciled from a provider status');
      return ownerOf(request, ref, streamId);
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError) continue; // the send path or another consumer answered meanwhile
      throw err;
    }
  }
  return undefined;
}

const ownerOf = (request: { companyId: number }, ref: StatusReference, streamId: string): ProviderMessageOwner => ({
  providerMessageId: ref.providerMessageId,
  kind: 'send',
  streamId,
  companyId: request.companyId,
});
