import { createHash } from 'node:crypto';

/** The body of every webhook: `{type, timestamp, data}` (docs/webhooks.md). */
export const webhookBody = (type: string, timestamp: string, data: unknown): string => JSON.stringify({ type, timestamp, data });

/** The webhook-id of a webhook event: derived from the log event's id (and the recipient within it), so stable on every retry and fan-out. */
export const webhookIdOf = (eventId: string, part = ''): string =>
  `msg_${createHash('sha256').update(`${eventId}:${part}`).digest('base64url').slice(0, 27)}`;
