import { isOutcomeUnknownCode } from './bulk';
import { defineEvent, type EventOf, isoDateTime, nullableString, positiveInt } from './define';

// Stream: send-{sendId}. One single template send: the request (everything the read models need), the
// provider's answer (accepted with its id, or rejected), then the delivery statuses (monotonic).

const variablesObject = { type: 'object', additionalProperties: true } as const;

export const TemplateSendRequested = defineEvent('TemplateSendRequested', {
  type: 'object', additionalProperties: false,
  required: ['sendId', 'companyId', 'numberId', 'phoneNumberId', 'templateId', 'templateName', 'language', 'category',
    'recipientPhone', 'recipientE164', 'variables', 'buttonVariables', 'requestedAt'],
  properties: {
    sendId: { type: 'string', minLength: 1 },
    companyId: positiveInt,
    numberId: positiveInt,
    phoneNumberId: { type: 'string', minLength: 1, description: "the provider's id of the sending number" },
    templateId: positiveInt,
    templateName: { type: 'string' },
    language: { type: 'string' },
    category: { type: 'string' },
    recipientPhone: { type: 'string', description: 'the recipient as the client sent it (`+` and digits)' },
    recipientE164: { type: 'string', description: 'the recipient normalized to E.164 (quota and contact matching)' },
    variables: variablesObject,
    buttonVariables: variablesObject,
    requestedAt: isoDateTime,
    requestFingerprint: {
      type: 'string', pattern: '^[0-9a-f]{64}$',
      description: 'a send made with an Idempotency-Key: the SHA-256 of its request, which a repeat under the key must match (docs/idempotency.md)',
    },
  },
} as const, { description: 'A single template send was requested and validated; the provider is called next.' });

export const TemplateSendAccepted = defineEvent('TemplateSendAccepted', {
  type: 'object', additionalProperties: false,
  required: ['sendId', 'companyId', 'numberId', 'recipientE164', 'providerMessageId', 'acceptedAt'],
  properties: {
    sendId: { type: 'string', minLength: 1 },
    companyId: positiveInt,
    numberId: positiveInt,
    recipientE164: { type: 'string', description: 'the recipient (quota: unique recipients per number in 24 h)' },
    providerMessageId: { type: 'string', minLength: 1 },
    acceptedAt: isoDateTime,
  },
} as const, { description: "The provider accepted the send (status `sent`); carries the provider's message id." });

export const TemplateSendRejected = defineEvent('TemplateSendRejected', {
  type: 'object', additionalProperties: false,
  required: ['sendId', 'companyId', 'code', 'message', 'retryable', 'rejectedAt'],
  properties: {
    sendId: { type: 'string', minLength: 1 },
    companyId: positiveInt,
    code: { type: 'string', description: "the provider's error code, or a transport code (network_error, http_503, timeout)" },
    message: { type: 'string' },
    retryable: { type: 'boolean', description: 'false: the provider refused it (422); true: still unavailable after retries (502)' },
    rejectedAt: isoDateTime,
    numberId: {
      ...positiveInt,
      description: "the sending number, given when the outcome is unknown (`sendOutcomeUnknown`: the provider may have the message); with `recipientE164` such a rejection counts in the number's 24 h quota as sent, from `requestedAt`; absent on events appended before 2026-11-27 (night)",
    },
    recipientE164: { type: 'string', description: 'the recipient normalized to E.164, given with `numberId`' },
    requestedAt: { ...isoDateTime, description: "the send's request time (the quota use counts from it), given with `numberId`" },
  },
} as const, { description: 'The provider refused the send or stayed unavailable: the attempt is recorded as failed.' });

/**
 * The code a single send records for a provider call that failed in a way the adapter did not classify
 * (src/commands/send/handler.ts): the provider may have the message, as for the bulk's `internal_error`.
 */
export const UNCLASSIFIED_SEND_FAILURE = 'provider_error';

/**
 * Whether a single send's rejection leaves its outcome unknown (the provider may have the message): the bulk's rule
 * (`isOutcomeUnknownCode`: timeout, connection lost, an answer naming no message id, `interrupted`, `internal_error`)
 * plus the single send's unclassified failure. Such a rejection carries its number and recipient and counts in the
 * quota as sent (docs/sends.md, "Quota gate"); any other code is a refusal and counts nothing.
 */
export const sendOutcomeUnknown = (code: string): boolean => isOutcomeUnknownCode(code) || code === UNCLASSIFIED_SEND_FAILURE;

export const DELIVERY_STATUSES = ['delivered', 'read', 'failed'] as const;

export const DeliveryStatusRecorded = defineEvent('DeliveryStatusRecorded', {
  type: 'object', additionalProperties: false,
  required: ['sendId', 'companyId', 'providerMessageId', 'status', 'at', 'errorCode', 'errorMessage', 'implied'],
  properties: {
    sendId: { type: 'string', minLength: 1 },
    companyId: positiveInt,
    providerMessageId: { type: 'string', minLength: 1 },
    status: { enum: DELIVERY_STATUSES },
    at: { ...isoDateTime, description: "the provider's timestamp of the status" },
    errorCode: nullableString,
    errorMessage: nullableString,
    implied: { type: 'boolean', description: 'true for a `delivered` implied by a `read` that arrived without it' },
  },
} as const, { description: 'A provider notification moved the delivery status forward (sent < delivered < read; failed).' });

export const sendEvents = [TemplateSendRequested, TemplateSendAccepted, TemplateSendRejected, DeliveryStatusRecorded] as const;
export type SendEvent = EventOf<(typeof sendEvents)[number]>;
export const SEND_EVENT_TYPES: readonly string[] = sendEvents.map((e) => e.type);
