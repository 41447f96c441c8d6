import type { Pool } from 'pg';
import type { RecordedEvent } from '../ports/event-store';
import type { WebhookEventType } from '../events/webhooks';
import type { BulkEventData } from '../events/bulk';
import type { SendEvent } from '../events/sends';
import { webhookBody, webhookIdOf } from '../commands/webhook-endpoint/payload';
import { findSendsByIds, type SendRecord } from '../projections/sends/queries';
import { findContactsForRecipients } from '../projections/sends/contacts';
import { getBulkSend } from '../projections/bulk/queries';
import { BULK_SCHEMA, bulkFailureMessage } from '../projections/bulk/projection';

// Maps log events to client webhook events (docs/webhooks.md). Message events are built from the recorded
// transitions (the deciders made them monotonic), with the rest of the status record from the read models,
// which the fan-out has let pass the batch first.

export interface WebhookEvent {
  companyId: number;
  type: WebhookEventType;
  webhookId: string;
  payload: string;
  /** the log position, to skip endpoints created after it */
  position: string;
}

/** The events of a contact upsert (one contact.upserted per append of them). */
const CONTACT_EVENT_TYPES: readonly string[] = ['ContactCreated', 'ContactProfileChanged', 'CustomFieldValueSet', 'CustomFieldValueCleared'];

export const SOURCE_EVENT_TYPES: readonly string[] = [
  'TemplateSendAccepted', 'TemplateSendRejected', 'DeliveryStatusRecorded',
  'BulkSendStarted', 'BulkSendFinished', 'BulkRecipientsDispatched', 'BulkRecipientsRejected', 'BulkRecipientStatusRecorded',
  ...CONTACT_EVENT_TYPES,
];

/** Whether `next` belongs to the contact upsert `e` is part of (one append of the contact's stream: one contact.upserted). */
export const continuesUpsert = (e: RecordedEvent, next: RecordedEvent): boolean =>
  CONTACT_EVENT_TYPES.includes(e.type) && next.streamId === e.streamId && next.metadata.correlationId === e.metadata.correlationId;

type Data<T extends SendEvent['type']> = Extract<SendEvent, { type: T }>['data'];
const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export async function toWebhookEvents(pool: Pool, events: readonly RecordedEvent[]): Promise<WebhookEvent[]> {
  const out: WebhookEvent[] = [];
  const sends = await loadSends(pool, events);
  const bulkMessages = await loadBulkMessages(pool, events);
  const emit = (e: RecordedEvent, companyId: number, type: WebhookEventType, data: unknown, webhookId = webhookIdOf(e.metadata.eventId)) =>
    out.push({ companyId, type, webhookId, payload: webhookBody(type, e.metadata.at, data), position: e.position });
  // A bulk message's status changes are decided against the bulk read model, which may lag: the log can hold a
  // change twice (an implied `delivered` after the real one), or one the item never shows (itemShows). Its webhook-id
  // is the message's and the status, so the first one in log order (the one the item shows) is delivered and a
  // repeat is recognised.
  const bulkWebhookId = (bulkId: string, index: number, status: string) => webhookIdOf(`bulk:${bulkId}:${index}`, status);

  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    switch (e.type) {
      case 'TemplateSendAccepted': {
        const d = e.data as Data<'TemplateSendAccepted'>;
        const rec = sends.get(d.sendId);
        if (rec) emit(e, d.companyId, 'message.sent', statusRecord(rec.send, rec.contact, { current: 'sent', sent_at: d.acceptedAt }));
        break;
      }
      case 'TemplateSendRejected': {
        const d = e.data as Data<'TemplateSendRejected'>;
        const rec = sends.get(d.sendId);
        if (rec) emit(e, d.companyId, 'message.failed', statusRecord(rec.send, rec.contact, { current: 'failed', failed_at: d.rejectedAt, error_code: d.code, error_message: d.message }));
        break;
      }
      case 'DeliveryStatusRecorded': {
        const d = e.data as Data<'DeliveryStatusRecorded'>;
        const rec = sends.get(d.sendId);
        if (!rec) break;
        const s = rec.send;
        // this transition's fields as the record shows them (set by it and never changed after; a failure's
        // message is never null there: docs/sends.md, "Status record")
        const snapshot = d.status === 'delivered' ? { current: 'delivered', delivered_at: iso(s.deliveredAt) ?? d.at }
          : d.status === 'read' ? { current: 'read', delivered_at: iso(s.deliveredAt), read_at: iso(s.readAt) ?? d.at }
            : { current: 'failed', delivered_at: iso(s.deliveredAt), failed_at: iso(s.failedAt) ?? d.at, error_code: s.statusErrorCode, error_message: s.statusErrorMessage };
        emit(e, d.companyId, `message.${d.status}`, statusRecord(s, rec.contact, { sent_at: iso(s.sentAt), ...snapshot }));
        break;
      }
      case 'BulkRecipientsDispatched': {
        const d = e.data as BulkEventData<'BulkRecipientsDispatched'>;
        for (const r of d.recipients) {
          const m = bulkMessages.get(`${d.bulkId}:${r.index}`);
          emit(e, d.companyId, 'message.sent', bulkItem(d.bulkId, m, r.recipientPhone, r.providerMessageId, { status: 'sent', sent_at: r.at }), bulkWebhookId(d.bulkId, r.index, 'sent'));
        }
        break;
      }
      case 'BulkRecipientsRejected': {
        const d = e.data as BulkEventData<'BulkRecipientsRejected'>;
        for (const r of d.recipients) {
          const m = bulkMessages.get(`${d.bulkId}:${r.index}`);
          emit(e, d.companyId, 'message.failed', bulkItem(d.bulkId, m, r.recipientPhone, null, { status: 'failed', sent_at: r.at, error_message: r.message }), bulkWebhookId(d.bulkId, r.index, 'failed'));
        }
        break;
      }
      case 'BulkRecipientStatusRecorded': {
        const d = e.data as BulkEventData<'BulkRecipientStatusRecorded'>;
        const m = bulkMessages.get(`${d.bulkId}:${d.index}`);
        if (m && !itemShows(m, d.status)) break;
        const snapshot = d.status === 'delivered' ? { delivered_at: d.at }
          : d.status === 'read' ? { delivered_at: iso(m?.delivered_at), read_at: d.at }
            : { delivered_at: iso(m?.delivered_at), error_message: bulkFailureMessage(d.errorCode, d.errorMessage) };
        emit(e, d.companyId, `message.${d.status}`, bulkItem(d.bulkId, m, m?.recipient_phone ?? null, d.providerMessageId, { status: d.status, sent_at: iso(m?.processed_at), ...snapshot }),
          bulkWebhookId(d.bulkId, d.index, d.status));
        break;
      }
      case 'BulkSendStarted': {
        const d = e.data as BulkEventData<'BulkSendStarted'>;
        emit(e, d.companyId, 'bulk_send.started', { bulk_send_id: d.bulkId, status: 'PROCESSING', started_at: d.at });
        break;
      }
      case 'BulkSendFinished': {
        const d = e.data as BulkEventData<'BulkSendFinished'>;
        const b = await getBulkSend(pool, d.companyId, d.bulkId);
        emit(e, d.companyId, 'bulk_send.completed', {
          bulk_send_id: d.bulkId, status: d.status, completed_at: d.at, total_recipients: b?.totalRecipients ?? d.dispatchedCount + d.rejectedCount,
          dispatched_count: d.dispatchedCount, rejected_count: d.rejectedCount,
          sent_count: b?.sentCount ?? null, delivered_count: b?.deliveredCount ?? null, read_count: b?.readCount ?? null,
          failed_count: b?.failedCount ?? null, pending_count: b?.pendingCount ?? null,
        });
        break;
      }
      case 'ContactCreated': case 'ContactProfileChanged': case 'CustomFieldValueSet': case 'CustomFieldValueCleared': {
        // one contact.upserted per append; the fan-out never splits one across batches (readWholeUpserts)
        let j = i;
        while (j + 1 < events.length && continuesUpsert(e, events[j + 1])) j++;
        const run = events.slice(i, j + 1);
        i = j;
        const d = e.data as { companyId: number; contactId: number };
        const created = run.find((x) => x.type === 'ContactCreated')?.data as { phone: string; contactListId: number } | undefined;
        emit(e, d.companyId, 'contact.upserted', {
          contact_id: d.contactId,
          created: created !== undefined,
          profile_changed: created !== undefined || run.some((x) => x.type === 'ContactProfileChanged'),
          versioned_custom_fields: run
            .filter((x) => x.type === 'CustomFieldValueSet' || x.type === 'CustomFieldValueCleared')
            .map((x) => {
              const f = x.data as { fieldId: number; key: string; version: number; value?: unknown[] };
              return { custom_field_id: f.fieldId, key: f.key, version: f.version, value: f.value ?? [] };
            }),
        });
        break;
      }
    }
  }
  return out;
}

type Contact = { id: number; fullName: string | null } | null;

async function loadSends(pool: Pool, events: readonly RecordedEvent[]): Promise<Map<string, { send: SendRecord; contact: Contact }>> {
  const ids = new Set<string>();
  for (const e of events) if (e.type === 'TemplateSendAccepted' || e.type === 'TemplateSendRejected' || e.type === 'DeliveryStatusRecorded') ids.add((e.data as { sendId: string }).sendId);
  const sends = await findSendsByIds(pool, [...ids]);
  const contacts = await findContactsForRecipients(pool, sends.map((s) => ({ companyId: s.companyId, e164: s.recipientE164 })));
  return new Map(sends.map((send) => [send.sendId, { send, contact: contacts.get(`${send.companyId}:${send.recipientE164}`) ?? null }]));
}

interface BulkMessage {
  id: string; recipient_phone: string; variables: Record<string, unknown>; status: string;
  processed_at: Date | null; delivered_at: Date | null; read_at: Date | null;
}

/**
 * Whether the bulk message item shows this status change. A bulk recipient's change is decided against the bulk
 * read model, which may lag: the log can hold one the item never shows (a `failed` after a `read` not yet projected,
 * or a `delivered` after a `failed`). The client gets only the changes the item shows, as for single sends.
 */
const itemShows = (m: BulkMessage, status: 'delivered' | 'read' | 'failed'): boolean =>
  status === 'delivered' ? m.delivered_at !== null : status === 'read' ? m.read_at !== null : m.status === 'failed';

async function loadBulkMessages(pool: Pool, events: readonly RecordedEvent[]): Promise<Map<string, BulkMessage>> {
  const bulkIds: string[] = [];
  const indexes: number[] = [];
  for (const e of events) {
    const d = e.data as { bulkId: string; index?: number; recipients?: Array<{ index: number }> };
    if (e.type === 'BulkRecipientStatusRecorded') { bulkIds.push(d.bulkId); indexes.push(d.index!); }
    if (e.type === 'BulkRecipientsDispatched' || e.type === 'BulkRecipientsRejected') for (const r of d.recipients!) { bulkIds.push(d.bulkId); indexes.push(r.index); }
  }
  if (bulkIds.length === 0) return new Map();
  const { rows } = await pool.query(
    `SELECT m.bulk_id, m.idx, m.id, m.recipient_phone, m.variables, m.status, m.processed_at, m.delivered_at, m.read_at
       FROM ${BULK_SCHEMA}.messages m JOIN unnest($1::uuid[], $2::int[]) AS k(b, i) ON m.bulk_id = k.b AND m.idx = k.i`,
    [bulkIds, indexes],
  );
  return new Map(rows.map((r) => [`${r.bulk_id}:${r.idx}`, r as BulkMessage]));
}

function statusRecord(send: SendRecord, contact: Contact, status: Record<string, string | null | undefined>) {
  return {
    id: send.id,
    template: { id: send.templateId, name: send.templateName, language: send.language, category: send.category },
    recipient: { phone: send.recipientPhone, contact_name: contact?.fullName ?? null, contact_id: contact?.id ?? null },
    variables_used: send.variables,
    delivery_status: { current: 'sent', sent_at: null, delivered_at: null, read_at: null, failed_at: null, error_code: null, error_message: null, ...status },
    meta_message_id: send.providerMessageId,
    was_successful: send.wasSuccessful === true,
    error_message: send.errorMessage,
    sent_at: (send.sentAt ?? send.requestedAt).toISOString(),
  };
}

function bulkItem(bulkId: string, m: BulkMessage | undefined, phone: string | null, providerMessageId: string | null, status: Record<string, string | null | undefined>) {
  return {
    bulk_send_id: bulkId,
    id: m ? Number(m.id) : null,
    recipient_phone: phone,
    meta_message_id: providerMessageId,
    variables_used: m?.variables ?? {},
    sent_at: null, delivered_at: null, read_at: null, error_message: null,
    ...status,
  };
}
