// The single-send aggregate (stream send-{sendId}). Pure: ids, time and the provider's answers come in on
// the commands. Lifecycle:
//   (none) --RequestTemplateSend--> requested --RecordSendAccepted--> accepted (delivery: sent)
//                                             --RecordSendRejected--> rejected
//   accepted: RecordDeliveryStatus moves delivery forward only: sent < delivered < read; failed from sent or
//   delivered. A read without delivered implies delivered (delivered_at = the read's time). Duplicates, a
//   late `sent` and anything after a terminal state decide nothing.
//   requested, with no live process sending it (a keyed send whose process died): ResolveUnansweredSend
//   records it rejected with code `interrupted` once `outcomeUnknownAfterMs` passed since the request, and
//   refuses with SEND_OUTCOME_UNKNOWN before that (docs/sends.md, "Idempotent sends").
//   A rejection whose outcome is unknown (`interrupted`, a timeout, ...: sendOutcomeUnknown) carries the request's
//   number, recipient and time: the quota counts it as sent (docs/sends.md, "Quota gate").
import { type Decider, DomainError } from '../decider';
import { type SendEvent, sendOutcomeUnknown } from '../../events/sends';

type Requested = Extract<SendEvent, { type: 'TemplateSendRequested' }>['data'];

export const sendStreamId = (sendId: string): string => `send-${sendId}`;

export type DeliveryState = 'sent' | 'delivered' | 'read' | 'failed';
export type ProviderStatus = DeliveryState;

export type SendCommand =
  | { type: 'RequestTemplateSend'; data: Requested }
  | { type: 'RecordSendAccepted'; data: { sendId: string; providerMessageId: string; at: string } }
  | { type: 'RecordSendRejected'; data: { sendId: string; code: string; message: string; retryable: boolean; at: string } }
  | {
      type: 'RecordDeliveryStatus';
      data: {
        sendId: string;
        providerMessageId: string;
        status: ProviderStatus;
        at: string;
        errorCode: string | null;
        errorMessage: string | null;
      };
    }
  | { type: 'ResolveUnansweredSend'; data: { sendId: string; now: string; outcomeUnknownAfterMs: number } };

/** The code and message of a keyed send whose process died before its answer was recorded. */
export const INTERRUPTED = { code: 'interrupted', message: 'interrupted, outcome unknown' } as const;

export type SendState =
  | { kind: 'none' }
  | { kind: 'requested'; request: Requested }
  | { kind: 'accepted'; request: Requested; providerMessageId: string; delivery: DeliveryState }
  | { kind: 'rejected'; request: Requested; code: string };

/**
 * What a rejection whose outcome is unknown (the provider may have the message: `sendOutcomeUnknown`) carries of its
 * request, so that the accounts read model counts it in the number's quota as sent, from the request; a refusal
 * carries nothing of it (docs/sends.md, "Quota gate").
 */
const quotaUseOf = (r: Requested, code: string) =>
  sendOutcomeUnknown(code) ? { numberId: r.numberId, recipientE164: r.recipientE164, requestedAt: r.requestedAt } : {};

const RANK: Record<DeliveryState, number> = { sent: 0, delivered: 1, read: 2, failed: 3 };

function decide(command: SendCommand, state: SendState): SendEvent[] {
  switch (command.type) {
    case 'RequestTemplateSend': {
      if (state.kind !== 'none') throw new DomainError('SEND_EXISTS', `send ${command.data.sendId} was already requested`);
      return [{ type: 'TemplateSendRequested', data: command.data }];
    }
    case 'RecordSendAccepted': {
      const { providerMessageId, at, sendId } = command.data;
      if (state.kind === 'accepted' && state.providerMessageId === providerMessageId) return [];
      if (state.kind !== 'requested') throw new DomainError('SEND_NOT_PENDING', `send ${sendId} is ${state.kind}, not awaiting the provider`);
      const r = state.request;
      return [{
        type: 'TemplateSendAccepted',
        data: { sendId: r.sendId, companyId: r.companyId, numberId: r.numberId, recipientE164: r.recipientE164, providerMessageId, acceptedAt: at },
      }];
    }
    case 'RecordSendRejected': {
      const { sendId, code, message, retryable, at } = command.data;
      if (state.kind === 'rejected') return [];
      if (state.kind !== 'requested') throw new DomainError('SEND_NOT_PENDING', `send ${sendId} is ${state.kind}, not awaiting the provider`);
      return [{
        type: 'TemplateSendRejected',
        data: { sendId: state.request.sendId, companyId: state.request.companyId, code, message, retryable, rejectedAt: at, ...quotaUseOf(state.request, code) },
      }];
    }
    case 'ResolveUnansweredSend': {
      const { sendId, now, outcomeUnknownAfterMs } = command.data;
      if (state.kind !== 'requested') return [];
      const waited = Date.parse(now) - Date.parse(state.request.requestedAt);
      if (waited < outcomeUnknownAfterMs) {
        throw new DomainError('SEND_OUTCOME_UNKNOWN', `the outcome of send ${sendId} is not known yet`);
      }
      return [{
        type: 'TemplateSendRejected',
        data: {
          sendId: state.request.sendId, companyId: state.request.companyId, ...INTERRUPTED, retryable: false, rejectedAt: now,
          ...quotaUseOf(state.request, INTERRUPTED.code),
        },
      }];
    }
    case 'RecordDeliveryStatus': {
      const { sendId, providerMessageId, status, at, errorCode, errorMessage } = command.data;
      if (state.kind !== 'accepted') {
        throw new DomainError('SEND_NOT_ACCEPTED', `send ${sendId} is ${state.kind}: it has no provider message to track`);
      }
      if (state.providerMessageId !== providerMessageId) {
        throw new DomainError('PROVIDER_ID_MISMATCH', `send ${sendId} has provider id ${state.providerMessageId}, not ${providerMessageId}`);
      }
      const base = { sendId: state.request.sendId, companyId: state.request.companyId, providerMessageId };
      const current = state.delivery;
      if (current === 'failed' || current === 'read') return [];
      switch (status) {
        case 'sent':
          return [];
        case 'delivered':
          return RANK[current] < RANK.delivered
            ? [{ type: 'DeliveryStatusRecorded', data: { ...base, status: 'delivered', at, errorCode: null, errorMessage: null, implied: false } }]
            : [];
        case 'read': {
          const events: SendEvent[] = [];
          if (current === 'sent') {
            events.push({ type: 'DeliveryStatusRecorded', data: { ...base, status: 'delivered', at, errorCode: null, errorMessage: null, implied: true } });
          }
          events.push({ type: 'DeliveryStatusRecorded', data: { ...base, status: 'read', at, errorCode: null, errorMessage: null, implied: false } });
          return events;
        }
        case 'failed':
          return [{ type: 'DeliveryStatusRecorded', data: { ...base, status: 'failed', at, errorCode, errorMessage, implied: false } }];
      }
    }
  }
}

function evolve(state: SendState, event: SendEvent): SendState {
  switch (event.type) {
    case 'TemplateSendRequested':
      return { kind: 'requested', request: event.data };
    case 'TemplateSendAccepted':
      return state.kind === 'requested'
        ? { kind: 'accepted', request: state.request, providerMessageId: event.data.providerMessageId, delivery: 'sent' }
        : state;
    case 'TemplateSendRejected':
      return state.kind === 'requested' ? { kind: 'rejected', request: state.request, code: event.data.code } : state;
    case 'DeliveryStatusRecorded':
      return state.kind === 'accepted' && RANK[event.data.status] > RANK[state.delivery] ? { ...state, delivery: event.data.status } : state;
  }
}

export const sendDecider: Decider<SendCommand, SendEvent, SendState> = {
  decide,
  evolve,
  initialState: () => ({ kind: 'none' }),
};
