import { MAY_HAVE_REACHED_CODES } from '../ports/provider';
import { defineEvent, type EventOf, isoDateTime, nullableString, positiveInt } from './define';

// Bulk template sends (docs/bulk.md). Two kinds of streams keep every append and every read small, also for
// 100,000 recipients:
//  - `bulk-{bulkId}`: the bulk's lifecycle: BulkSendCreated (counts, chunk count, the template snapshot),
//    BulkSendStarted, BulkSendPaused/Resumed (quota), BulkSendCancelled, BulkSendFinished.
//  - `bulkchunk-{bulkId}-{n}` (n = 0, 1, ...): BulkRecipientsAdded (at most 1,000 deduplicated recipients,
//    appended before BulkSendCreated, which is the commit point of a creation), then the outcomes, batched:
//    BulkRecipientsDispatched / BulkRecipientsRejected carry the recipients of one dispatch window in that chunk
//    (the catalogue's BulkRecipientDispatched/Rejected, one event per window instead of per recipient, for
//    throughput). Every recipient is in exactly one outcome event: the work table gives a recipient one outcome
//    and one outcome batch, and a batch is appended under an event id derived from it (a re-append after a crash
//    is recognised). Then the recipients' delivery statuses (BulkRecipientStatusRecorded, one per notification).

const variablesObject = { type: 'object', additionalProperties: true } as const;
const bulkId = { type: 'string', format: 'uuid' } as const;
const index = { type: 'integer', minimum: 0, description: 'position of the recipient in the deduplicated list (0-based)' } as const;
const chunk = { type: 'integer', minimum: 0, description: 'the chunk stream `bulkchunk-{bulkId}-{chunk}` holding the recipient' } as const;

export const BULK_FINAL_STATUSES = ['COMPLETED', 'PARTIAL', 'FAILED'] as const;

export const BulkRecipientsAdded = defineEvent('BulkRecipientsAdded', {
  type: 'object', additionalProperties: false,
  required: ['bulkId', 'companyId', 'chunk', 'recipients'],
  properties: {
    bulkId,
    companyId: positiveInt,
    chunk,
    recipients: {
      type: 'array', minItems: 1, maxItems: 1000,
      items: {
        type: 'object', additionalProperties: false,
        required: ['index', 'phone', 'variables', 'buttonVariables'],
        properties: {
          index,
          phone: { type: 'string', description: 'as the client sent it (`+` and digits)' },
          variables: variablesObject,
          buttonVariables: variablesObject,
        },
      },
    },
  },
} as const, { description: 'A chunk (at most 1,000) of the deduplicated recipients of a bulk send, with their variables.' });

const templateVariable = {
  type: 'object', additionalProperties: true, required: ['name', 'type', 'position', 'isRequired', 'component'],
  properties: {
    name: { type: 'string' }, type: { type: 'string' }, position: { type: 'integer' }, isRequired: { type: 'boolean' }, component: { type: 'string' },
  },
} as const;
const templateButton = {
  type: 'object', additionalProperties: true, required: ['type', 'text'],
  properties: { type: { type: 'string' }, text: { type: 'string' }, url: { type: 'string' }, phoneNumber: { type: 'string' } },
} as const;

export const BulkSendCreated = defineEvent('BulkSendCreated', {
  type: 'object', additionalProperties: false,
  required: ['bulkId', 'taskId', 'companyId', 'createdByUserId', 'numberId', 'phoneNumberId', 'displayPhoneNumber', 'verifiedName',
    'tier', 'templateId', 'templateName', 'language', 'category', 'templateStatus', 'template', 'totalRecipients', 'uniqueRecipients',
    'chunkCount', 'createdAt'],
  properties: {
    bulkId,
    taskId: { type: 'string', description: 'id of the dispatcher job (the response `task_id`)' },
    companyId: positiveInt,
    createdByUserId: { type: ['integer', 'null'], description: 'the user of the API key that created it (created_by)' },
    numberId: positiveInt,
    phoneNumberId: { type: 'string' },
    displayPhoneNumber: { type: 'string' },
    verifiedName: { type: 'string' },
    tier: { type: 'string', description: 'the messaging tier at creation (the dispatcher paces by the current one)' },
    templateId: positiveInt,
    templateName: { type: 'string' },
    language: { type: 'string' },
    category: { type: 'string' },
    templateStatus: { type: 'string' },
    template: {
      type: 'object', additionalProperties: false, required: ['variables', 'buttons'],
      description: 'the template as validated against: the dispatcher builds the components from this snapshot',
      properties: { variables: { type: 'array', items: templateVariable }, buttons: { type: 'array', items: templateButton } },
    },
    totalRecipients: { ...positiveInt, description: 'recipients submitted' },
    uniqueRecipients: { ...positiveInt, description: 'recipients after deduplication (the ones sent to)' },
    chunkCount: positiveInt,
    createdAt: isoDateTime,
  },
} as const, { description: 'A bulk send was created (its recipient chunks are already stored); the dispatcher takes it from here.' });

export const BulkSendStarted = defineEvent('BulkSendStarted', {
  type: 'object', additionalProperties: false, required: ['bulkId', 'companyId', 'dispatcherId', 'at'],
  properties: { bulkId, companyId: positiveInt, dispatcherId: { type: 'string' }, at: isoDateTime },
} as const, { description: 'A dispatcher took the bulk send (QUEUED → PROCESSING).' });

export const BulkSendPaused = defineEvent('BulkSendPaused', {
  type: 'object', additionalProperties: false, required: ['bulkId', 'companyId', 'reason', 'quotaUsed', 'quotaLimit', 'resumeAt', 'at'],
  properties: {
    bulkId, companyId: positiveInt,
    reason: { enum: ['quota'] },
    quotaUsed: { type: 'integer', minimum: 0 },
    quotaLimit: { type: 'integer', minimum: 0 },
    resumeAt: { ...nullableString, description: 'when the rolling 24 h window frees room next (ISO 8601)' },
    at: isoDateTime,
  },
} as const, { description: "The number's rolling 24 h quota is used up: sending stops (status stays PROCESSING) until the window frees room." });

export const BulkSendResumed = defineEvent('BulkSendResumed', {
  type: 'object', additionalProperties: false, required: ['bulkId', 'companyId', 'at'],
  properties: { bulkId, companyId: positiveInt, at: isoDateTime },
} as const, { description: 'The quota window freed room: sending continues.' });

export const BulkSendCancelled = defineEvent('BulkSendCancelled', {
  type: 'object', additionalProperties: false, required: ['bulkId', 'companyId', 'cancelledBy', 'at'],
  properties: { bulkId, companyId: positiveInt, cancelledBy: { type: 'string', description: 'actor (api key id)' }, at: isoDateTime },
} as const, { description: 'Cancelled manually: no further sends; what was sent stays sent and keeps being tracked.' });

export const BulkSendFinished = defineEvent('BulkSendFinished', {
  type: 'object', additionalProperties: false, required: ['bulkId', 'companyId', 'status', 'dispatchedCount', 'rejectedCount', 'at'],
  properties: {
    bulkId, companyId: positiveInt,
    status: { enum: BULK_FINAL_STATUSES, description: 'COMPLETED: no failures; PARTIAL: some failed; FAILED: all failed' },
    dispatchedCount: { type: 'integer', minimum: 0 },
    rejectedCount: { type: 'integer', minimum: 0 },
    at: isoDateTime,
  },
} as const, { description: 'Every recipient has its outcome.' });

export const BulkRecipientsDispatched = defineEvent('BulkRecipientsDispatched', {
  type: 'object', additionalProperties: false,
  required: ['bulkId', 'companyId', 'numberId', 'chunk', 'recipients'],
  properties: {
    bulkId, companyId: positiveInt, numberId: positiveInt, chunk,
    recipients: {
      type: 'array', minItems: 1, maxItems: 1000,
      items: {
        type: 'object', additionalProperties: false,
        required: ['index', 'recipientPhone', 'recipientE164', 'providerMessageId', 'attempts', 'at'],
        properties: {
          index,
          recipientPhone: { type: 'string' },
          recipientE164: { type: 'string', description: 'normalized (quota: unique recipients per number in 24 h)' },
          providerMessageId: { type: 'string', minLength: 1 },
          attempts: positiveInt,
          at: isoDateTime,
        },
      },
    },
  },
} as const, {
  description: 'The provider accepted the messages of these recipients of one chunk (status `sent`): one event per dispatch window and chunk.',
});

/**
 * Error codes of a failed recipient whose outcome is unknown: the provider may have the message (the dispatcher died
 * with the send at the provider, the call timed out, the connection was lost, it failed unexpectedly, the provider
 * accepted it with an answer naming no message id: the port's mayHaveReachedProvider). Such a
 * recipient counts in its number's 24 h quota as sent (docs/bulk.md, "Crashes and leases").
 */
export const OUTCOME_UNKNOWN_CODES = ['interrupted', 'internal_error', ...MAY_HAVE_REACHED_CODES] as const;
const OUTCOME_UNKNOWN: ReadonlySet<string> = new Set(OUTCOME_UNKNOWN_CODES);

/** Whether a failed recipient's error code says the provider may have its message. */
export const isOutcomeUnknownCode = (code: string): boolean => OUTCOME_UNKNOWN.has(code);

/** Whether a rejected recipient's message may have been sent (its outcome is unknown). */
export const outcomeUnknown = (r: { code: string; interrupted: boolean }): boolean => r.interrupted || isOutcomeUnknownCode(r.code);

export const BulkRecipientsRejected = defineEvent('BulkRecipientsRejected', {
  type: 'object', additionalProperties: false,
  required: ['bulkId', 'companyId', 'chunk', 'recipients'],
  properties: {
    bulkId, companyId: positiveInt, chunk,
    numberId: { ...positiveInt, description: 'the sending number (quota); absent on events appended before 2026-11-27' },
    recipients: {
      type: 'array', minItems: 1, maxItems: 1000,
      items: {
        type: 'object', additionalProperties: false,
        required: ['index', 'recipientPhone', 'code', 'message', 'interrupted', 'attempts', 'at'],
        properties: {
          index,
          recipientPhone: { type: 'string' },
          recipientE164: {
            type: 'string',
            description: 'normalized; with `numberId`, an outcome-unknown failure (the provider may have the message) counts in the quota as sent; absent on events appended before 2026-11-27',
          },
          code: { type: 'string', description: "the provider's code, a transport code, or `interrupted`" },
          message: { type: 'string' },
          interrupted: { type: 'boolean', description: 'true: the dispatcher died while the send was in flight (outcome unknown; never sent again)' },
          attempts: { type: 'integer', minimum: 0 },
          at: isoDateTime,
        },
      },
    },
  },
} as const, { description: 'The sends to these recipients of one chunk failed (status `failed`).' });

export const BulkRecipientStatusRecorded = defineEvent('BulkRecipientStatusRecorded', {
  type: 'object', additionalProperties: false,
  required: ['bulkId', 'companyId', 'chunk', 'index', 'providerMessageId', 'status', 'at', 'errorCode', 'errorMessage', 'implied'],
  properties: {
    bulkId, companyId: positiveInt, chunk, index,
    providerMessageId: { type: 'string', minLength: 1 },
    status: { enum: ['delivered', 'read', 'failed'] },
    at: isoDateTime,
    errorCode: nullableString,
    errorMessage: nullableString,
    implied: { type: 'boolean', description: 'a `delivered` implied by a `read` that arrived without it' },
  },
} as const, { description: 'A provider notification moved the delivery status of a bulk recipient forward.' });

export const bulkEvents = [
  BulkRecipientsAdded, BulkSendCreated, BulkSendStarted, BulkSendPaused, BulkSendResumed, BulkSendCancelled, BulkSendFinished,
  BulkRecipientsDispatched, BulkRecipientsRejected, BulkRecipientStatusRecorded,
] as const;
export type BulkEvent = EventOf<(typeof bulkEvents)[number]>;
export type BulkEventData<T extends BulkEvent['type']> = Extract<BulkEvent, { type: T }>['data'];
export const BULK_EVENT_TYPES: readonly string[] = bulkEvents.map((e) => e.type);
