import type { Pool, PoolClient } from 'pg';
import { SENDS_SCHEMA } from './projection';
import { bulkFailureMessage } from '../bulk/projection';

type Db = Pool | PoolClient;

export interface SendRecord {
  id: number;
  sendId: string;
  companyId: number;
  numberId: number;
  phoneNumberId: string;
  templateId: number;
  templateName: string;
  language: string;
  category: string;
  recipientPhone: string;
  recipientE164: string;
  variables: Record<string, unknown>;
  buttonVariables: Record<string, unknown>;
  requestedAt: Date;
  providerMessageId: string | null;
  wasSuccessful: boolean | null;
  errorMessage: string | null;
  status: 'pending' | 'sent' | 'delivered' | 'read' | 'failed';
  sentAt: Date | null;
  deliveredAt: Date | null;
  readAt: Date | null;
  failedAt: Date | null;
  statusErrorCode: string | null;
  statusErrorMessage: string | null;
}

/** A row as the status record shows it. A provider failure without a message gets the bulk message item's (its code, else `failed`). */
const toSend = (r: any): SendRecord => ({
  id: Number(r.id),
  sendId: r.send_id,
  companyId: r.company_id,
  numberId: r.number_id,
  phoneNumberId: r.phone_number_id,
  templateId: r.template_id,
  templateName: r.template_name,
  language: r.language,
  category: r.category,
  recipientPhone: r.recipient_phone,
  recipientE164: r.recipient_e164,
  variables: r.variables,
  buttonVariables: r.button_variables,
  requestedAt: r.requested_at,
  providerMessageId: r.provider_message_id,
  wasSuccessful: r.was_successful,
  errorMessage: r.error_message,
  status: r.status,
  sentAt: r.sent_at,
  deliveredAt: r.delivered_at,
  readAt: r.read_at,
  failedAt: r.failed_at,
  statusErrorCode: r.status_error_code,
  statusErrorMessage: r.status === 'failed' ? bulkFailureMessage(r.status_error_code, r.status_error_message) : r.status_error_message,
});

export async function findSendByProviderMessageId(db: Db, providerMessageId: string): Promise<SendRecord | undefined> {
  const r = await db.query(`SELECT * FROM ${SENDS_SCHEMA}.sends WHERE provider_message_id = $1`, [providerMessageId]);
  return r.rows[0] ? toSend(r.rows[0]) : undefined;
}

export async function findSendById(db: Db, sendId: string): Promise<SendRecord | undefined> {
  const r = await db.query(`SELECT * FROM ${SENDS_SCHEMA}.sends WHERE send_id = $1`, [sendId]);
  return r.rows[0] ? toSend(r.rows[0]) : undefined;
}

/** The sends with these ids, in one query (ids without a send are absent). */
export async function findSendsByIds(db: Db, sendIds: readonly string[]): Promise<SendRecord[]> {
  if (sendIds.length === 0) return [];
  const r = await db.query(`SELECT * FROM ${SENDS_SCHEMA}.sends WHERE send_id = ANY($1::text[])`, [sendIds]);
  return r.rows.map(toSend);
}

export type ProviderMessageKind = 'send' | 'bulk';

export interface ProviderMessageOwner {
  providerMessageId: string;
  kind: ProviderMessageKind | string;
  streamId: string;
  companyId: number;
}

/** Who owns a provider message id (the delivery consumer dispatches on `kind`). */
export async function findProviderMessageOwner(db: Db, providerMessageId: string): Promise<ProviderMessageOwner | undefined> {
  const r = await db.query(
    `SELECT provider_message_id, kind, stream_id, company_id FROM ${SENDS_SCHEMA}.provider_messages WHERE provider_message_id = $1`,
    [providerMessageId],
  );
  const row = r.rows[0];
  return row ? { providerMessageId: row.provider_message_id, kind: row.kind, streamId: row.stream_id, companyId: row.company_id } : undefined;
}

/** The company and internal id of a sending number, by the provider's phone number id. */
export async function findNumberByProviderId(db: Db, phoneNumberId: string): Promise<{ numberId: number; companyId: number } | undefined> {
  const r = await db.query(
    `SELECT number_id, company_id FROM ${SENDS_SCHEMA}.numbers WHERE phone_number_id = $1 ORDER BY number_id LIMIT 1`,
    [phoneNumberId],
  );
  const row = r.rows[0];
  return row ? { numberId: row.number_id, companyId: row.company_id } : undefined;
}
