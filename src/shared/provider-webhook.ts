// The provider's webhook format and the records the ingress publishes on `provider.webhooks`.
// Shared by the HTTP ingress (src/http/routes/webhooks.ts), the sandbox provider (which emits its
// notifications through the same path) and the delivery consumer (src/workers/delivery-consumer.ts).
//
// Webhook body (the provider's format):
//   {object: "whatsapp_business_account", entry: [{id, changes: [{field: "messages", value: {
//     messaging_product, metadata: {display_phone_number, phone_number_id},
//     contacts?: [{wa_id, profile: {name}}],
//     statuses?: [{id, status, timestamp, recipient_id, biz_opaque_callback_data?, errors?: [{code, title, message, error_data: {details}}]}],
//     messages?: [{id, from, timestamp, type, text?: {body}, image?: {...}, context?: {id}, ...}] }}]}]}
//
// Records (one per status, one per message), JSON values:
//   {kind: "status",  phoneNumberId, displayPhoneNumber, status: <the provider's status object>, receivedAt}
//     key = the provider message id (status.id)
//   {kind: "message", phoneNumberId, displayPhoneNumber, contact: <matching contacts[] item or null>,
//     message: <the provider's message object>, receivedAt}
//     key = the sender (message.from)
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { OutgoingRecord } from '../ports/transport';

export const PROVIDER_WEBHOOK_TOPIC = 'provider.webhooks';

export interface WebhookStatusRecord {
  kind: 'status';
  phoneNumberId: string | null;
  displayPhoneNumber: string | null;
  status: unknown;
  receivedAt: string;
}

export interface WebhookMessageRecord {
  kind: 'message';
  phoneNumberId: string | null;
  displayPhoneNumber: string | null;
  contact: unknown;
  message: unknown;
  receivedAt: string;
}

export type WebhookRecord = WebhookStatusRecord | WebhookMessageRecord;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/**
 * Splits a webhook body into records, in body order. Returns null when the body is not a webhook
 * notification at all (no `entry` array). Items that are not objects are still published (the consumer
 * dead-letters them with a reason), so nothing the provider sent disappears silently.
 */
export function splitWebhook(payload: unknown, receivedAt: string): OutgoingRecord[] | null {
  if (!isObject(payload) || !Array.isArray(payload.entry)) return null;
  const records: OutgoingRecord[] = [];
  for (const entry of payload.entry) {
    for (const change of arr(isObject(entry) ? entry.changes : undefined)) {
      const value = isObject(change) ? change.value : undefined;
      if (!isObject(value)) continue;
      const metadata = isObject(value.metadata) ? value.metadata : {};
      const phoneNumberId = str(metadata.phone_number_id);
      const displayPhoneNumber = str(metadata.display_phone_number);
      for (const status of arr(value.statuses)) {
        const v: WebhookStatusRecord = { kind: 'status', phoneNumberId, displayPhoneNumber, status, receivedAt };
        records.push({ key: isObject(status) ? str(status.id) : null, value: v });
      }
      const contacts = arr(value.contacts);
      for (const message of arr(value.messages)) {
        const from = isObject(message) ? str(message.from) : null;
        const contact = contacts.find((c) => isObject(c) && str(c.wa_id) === from) ?? (contacts.length === 1 ? contacts[0] : null);
        const v: WebhookMessageRecord = { kind: 'message', phoneNumberId, displayPhoneNumber, contact: contact ?? null, message, receivedAt };
        records.push({ key: from, value: v });
      }
    }
  }
  return records;
}

export type ProviderStatusName = 'sent' | 'delivered' | 'read' | 'failed';

export interface StatusNotification {
  phoneNumberId: string;
  displayPhoneNumber?: string;
  providerMessageId: string;
  status: ProviderStatusName;
  /** unix seconds, as the provider sends them (a string) */
  timestamp: string;
  recipientId: string;
  errors?: Array<{ code: number; title: string; message?: string; error_data?: { details: string } }>;
  /** the send's reference given on the send, echoed as `biz_opaque_callback_data` */
  clientReference?: string;
}

/** A webhook body carrying status notifications, in the provider's format (the sandbox and tests use it). */
export function statusWebhook(statuses: StatusNotification[]): object {
  const byNumber = new Map<string, StatusNotification[]>();
  for (const s of statuses) byNumber.set(s.phoneNumberId, [...(byNumber.get(s.phoneNumberId) ?? []), s]);
  return {
    object: 'whatsapp_business_account',
    entry: [...byNumber].map(([phoneNumberId, list]) => ({
      id: `waba-${phoneNumberId}`,
      changes: [
        {
          field: 'messages',
          value: {
            messaging_product: 'whatsapp',
            metadata: { display_phone_number: list[0].displayPhoneNumber ?? '', phone_number_id: phoneNumberId },
            statuses: list.map((s) => ({
              id: s.providerMessageId,
              status: s.status,
              timestamp: s.timestamp,
              recipient_id: s.recipientId,
              ...(s.clientReference ? { biz_opaque_callback_data: s.clientReference } : {}),
              ...(s.errors ? { errors: s.errors } : {}),
            })),
          },
        },
      ],
    })),
  };
}

/** `sha256=` + hex HMAC-SHA256 of the raw body with the app secret (the provider's X-Hub-Signature-256). */
export function signWebhook(appSecret: string, rawBody: Buffer | string): string {
  return `sha256=${createHmac('sha256', appSecret).update(rawBody).digest('hex')}`;
}

/** `sha256=` and exactly 64 hex digits: Buffer.from(…, 'hex') alone stops at the first non-hex character. */
const SIGNATURE_HEADER = /^sha256=([0-9a-fA-F]{64})$/;

/** Constant-time check of an X-Hub-Signature-256 header against the raw body. */
export function verifyWebhookSignature(appSecret: string, rawBody: Buffer, header: string | undefined): boolean {
  const hex = header === undefined ? undefined : SIGNATURE_HEADER.exec(header)?.[1];
  if (!hex) return false;
  const expected = createHmac('sha256', appSecret).update(rawBody).digest();
  return timingSafeEqual(Buffer.from(hex, 'hex'), expected);
}

/**
 * Constant-time check of the verification handshake's `hub.verify_token`: both sides are hashed first, so neither
 * the content nor the length of the configured token shows in the time taken.
 */
export function verifyTokenMatches(expected: string, given: string): boolean {
  const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(expected), digest(given)) && expected === given;
}
