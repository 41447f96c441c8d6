import { defineEvent, type EventOf, isoDateTime, nullableString, positiveInt } from './define';

// Stream: webhookendpoint-{endpointId}. A client's endpoint for delivery-status webhooks (docs/webhooks.md).
// Signing secrets are never stored in clear: `secret` is AES-256-GCM ciphertext (src/commands/webhook-endpoint/secrets.ts).

export const WEBHOOK_EVENT_TYPES = [
  'message.sent', 'message.delivered', 'message.read', 'message.failed',
  'bulk_send.started', 'bulk_send.completed', 'contact.upserted',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const WEBHOOK_DISABLE_REASONS = ['client', 'gone', 'failing'] as const;

const endpointId = { type: 'string', minLength: 1 } as const;
const eventTypes = { type: 'array', minItems: 1, uniqueItems: true, items: { enum: WEBHOOK_EVENT_TYPES } } as const;
const encryptedSecret = { type: 'string', minLength: 1, description: 'AES-256-GCM ciphertext of the whsec_ secret (base64: iv, tag, data)' } as const;

export const WebhookEndpointCreated = defineEvent('WebhookEndpointCreated', {
  type: 'object', additionalProperties: false,
  required: ['endpointId', 'companyId', 'url', 'eventTypes', 'description', 'secret', 'createdAt'],
  properties: { endpointId, companyId: positiveInt, url: { type: 'string' }, eventTypes, description: nullableString, secret: encryptedSecret, createdAt: isoDateTime },
} as const, { description: 'A client registered a webhook endpoint (enabled).' });

export const WebhookEndpointChanged = defineEvent('WebhookEndpointChanged', {
  type: 'object', additionalProperties: false,
  required: ['endpointId', 'companyId', 'url', 'eventTypes', 'description'],
  properties: { endpointId, companyId: positiveInt, url: { type: 'string' }, eventTypes, description: nullableString },
} as const, { description: "The endpoint's url, event types or description changed (full new values)." });

export const WebhookEndpointDisabled = defineEvent('WebhookEndpointDisabled', {
  type: 'object', additionalProperties: false,
  required: ['endpointId', 'companyId', 'reason', 'at'],
  properties: {
    endpointId, companyId: positiveInt,
    reason: { enum: WEBHOOK_DISABLE_REASONS, description: 'client: by the client; gone: it answered 410; failing: every attempt failed for 5 days' },
    at: isoDateTime,
  },
} as const, { description: 'The endpoint stopped receiving events.' });

export const WebhookEndpointEnabled = defineEvent('WebhookEndpointEnabled', {
  type: 'object', additionalProperties: false,
  required: ['endpointId', 'companyId', 'at'],
  properties: { endpointId, companyId: positiveInt, at: isoDateTime },
} as const, { description: 'The client enabled the endpoint again.' });

export const WebhookEndpointSecretRotated = defineEvent('WebhookEndpointSecretRotated', {
  type: 'object', additionalProperties: false,
  required: ['endpointId', 'companyId', 'secret', 'previousSecretValidUntil'],
  properties: { endpointId, companyId: positiveInt, secret: encryptedSecret, previousSecretValidUntil: isoDateTime },
} as const, { description: 'A new signing secret; the previous one keeps signing alongside it until previousSecretValidUntil.' });

export const WebhookEndpointDeleted = defineEvent('WebhookEndpointDeleted', {
  type: 'object', additionalProperties: false,
  required: ['endpointId', 'companyId', 'at'],
  properties: { endpointId, companyId: positiveInt, at: isoDateTime },
} as const, { description: 'The client deleted the endpoint; its queued deliveries are dropped.' });

export const webhookEvents = [
  WebhookEndpointCreated, WebhookEndpointChanged, WebhookEndpointDisabled, WebhookEndpointEnabled, WebhookEndpointSecretRotated, WebhookEndpointDeleted,
] as const;
export type WebhookEndpointEvent = EventOf<(typeof webhookEvents)[number]>;
export const WEBHOOK_ENDPOINT_EVENT_TYPES: readonly string[] = webhookEvents.map((e) => e.type);
