import { defineEvent, type EventOf, isoDateTime, nullableString } from './define';

// Stream: conversation-{companyId}-{conversationId}. Recorded from `conversation.messages`,
// `switchboard import-messages`, inbound provider messages and the service's own template sends.

export const CHANNELS = ['PROVIDER_MSGAPP', 'MSGAPP_GATEWAY', 'PHOTOAPP', 'SOCIALMSG', 'FLOWTOOL_MSGAPP', 'FLOWTOOL_PHOTOAPP'] as const;
export const CONTENT_TYPES = [
  'text', 'image', 'video', 'audio', 'file', 'sticker', 'location', 'contact', 'system', 'notification_template',
  'carousel', 'story_mention', 'story_reply', 'ice_breaker_response',
] as const;

export const MessageRecorded = defineEvent('MessageRecorded', {
  type: 'object', additionalProperties: false,
  required: ['companyId', 'messageId', 'conversationId', 'occurredAt', 'channel', 'direction', 'author', 'contactPhone', 'content',
    'replyToMessageId', 'classifications', 'extractions', 'toolCalls', 'traceId'],
  properties: {
    companyId: { type: 'integer', minimum: 1 },
    messageId: { type: 'string', minLength: 1, description: "the platform's real message id (unique per company)" },
    conversationId: { type: 'string', minLength: 1 },
    occurredAt: isoDateTime,
    channel: { enum: CHANNELS },
    direction: { enum: ['inbound', 'outbound'] },
    author: {
      type: 'object', additionalProperties: false, required: ['type'],
      properties: {
        type: { enum: ['contact', 'agent', 'human_operator', 'system'] },
        contactId: { type: ['integer', 'null'] }, agentId: { type: 'integer' }, operatorId: { type: 'integer' },
      },
    },
    contactPhone: { ...nullableString, description: 'E.164 when known' },
    content: {
      type: 'object', additionalProperties: false, required: ['type', 'text', 'mediaUrl', 'mediaMime'],
      properties: { type: { enum: CONTENT_TYPES }, text: { type: 'string' }, mediaUrl: nullableString, mediaMime: nullableString },
    },
    replyToMessageId: nullableString,
    classifications: { type: 'array', items: { type: 'object', required: ['label', 'value'], properties: { label: { type: 'string' }, value: {} } } },
    extractions: { type: 'array', items: { type: 'object', required: ['key', 'value'], properties: { key: { type: 'string' }, value: {} } } },
    toolCalls: {
      type: 'array',
      items: {
        type: 'object', additionalProperties: false, required: ['toolName', 'success', 'executionTimeMs'],
        properties: { toolName: { type: 'string' }, success: { type: 'boolean' }, executionTimeMs: { type: 'integer' } },
      },
    },
    traceId: nullableString,
  },
} as const);

const messageRef = {
  type: 'object', additionalProperties: false, required: ['companyId', 'messageId', 'conversationId'],
  properties: { companyId: { type: 'integer', minimum: 1 }, messageId: { type: 'string' }, conversationId: { type: 'string' } },
} as const;

export const MessageDeleted = defineEvent('MessageDeleted', messageRef);

export const MessageRestored = defineEvent('MessageRestored', messageRef, {
  description: 'A deleted message is not deleted any more (a later record says deleted: false): it is exported again.',
});

export const conversationEvents = [MessageRecorded, MessageDeleted, MessageRestored] as const;
export type ConversationEvent = EventOf<(typeof conversationEvents)[number]>;
