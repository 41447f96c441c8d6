import type { Pool } from 'pg';
import { BULK_SCHEMA } from './projection';

// Query functions of the `bulk` read model (qualified names). The current template status, tier and creator
// come from the accounts and business read models (joined; the bulk's own snapshot when they are missing).

const S = BULK_SCHEMA;

export type BulkStatus = 'QUEUED' | 'PROCESSING' | 'COMPLETED' | 'PARTIAL' | 'FAILED' | 'CANCELLED';
export type BulkMessageStatus = 'sent' | 'delivered' | 'read' | 'failed';

export interface BulkSendRow {
  bulkId: string;
  taskId: string;
  companyId: number;
  status: BulkStatus;
  paused: boolean;
  numberId: number;
  phoneNumberId: string;
  displayPhoneNumber: string;
  verifiedName: string;
  tier: string;
  templateId: number;
  templateName: string;
  language: string;
  templateStatus: string;
  submittedRecipients: number;
  totalRecipients: number;
  pendingCount: number;
  sentCount: number;
  deliveredCount: number;
  readCount: number;
  failedCount: number;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  createdBy: { id: number; email: string; firstName: string; lastName: string } | null;
}

const SELECT_BULK = `
  SELECT b.*, COALESCE(t.status, b.template_status) AS current_template_status, COALESCE(n.tier, b.tier) AS current_tier,
         u.user_id AS u_id, u.email AS u_email, u.first_name AS u_first_name, u.last_name AS u_last_name
    FROM ${S}.bulk_sends b
    LEFT JOIN rm_accounts.templates t ON t.template_id = b.template_id
    LEFT JOIN rm_accounts.numbers n ON n.number_id = b.number_id
    LEFT JOIN rm_business.users u ON u.company_id = b.company_id AND u.user_id = b.created_by_user_id`;

const toBulk = (r: any): BulkSendRow => ({
  bulkId: r.bulk_id,
  taskId: r.task_id,
  companyId: r.company_id,
  status: r.status,
  paused: r.paused,
  numberId: r.number_id,
  phoneNumberId: r.phone_number_id,
  displayPhoneNumber: r.display_phone_number,
  verifiedName: r.verified_name,
  tier: r.current_tier,
  templateId: r.template_id,
  templateName: r.template_name,
  language: r.language,
  templateStatus: r.current_template_status,
  submittedRecipients: r.submitted_recipients,
  totalRecipients: r.total_recipients,
  pendingCount: r.pending_count,
  sentCount: r.sent_count,
  deliveredCount: r.delivered_count,
  readCount: r.read_count,
  failedCount: r.failed_count,
  createdAt: r.created_at,
  startedAt: r.started_at,
  completedAt: r.completed_at,
  createdBy: r.u_id === null || r.u_id === undefined
    ? null
    : { id: r.u_id, email: r.u_email, firstName: r.u_first_name, lastName: r.u_last_name },
});

/** A company's bulk send; undefined when unknown or another company's. */
export async function getBulkSend(pool: Pool, companyId: number, bulkId: string): Promise<BulkSendRow | undefined> {
  const r = await pool.query(`${SELECT_BULK} WHERE b.bulk_id = $1 AND b.company_id = $2`, [bulkId, companyId]);
  return r.rows[0] ? toBulk(r.rows[0]) : undefined;
}

export interface BulkListFilters {
  status?: BulkStatus;
  templateId?: number;
  /** YYYY-MM-DD, inclusive (UTC) */
  createdAfter?: string;
  /** YYYY-MM-DD, inclusive (UTC) */
  createdBefore?: string;
}

/** A page of a company's bulk sends, newest first. */
export async function listBulkSends(
  pool: Pool,
  companyId: number,
  filters: BulkListFilters,
  page: { offset: number; limit: number },
): Promise<{ count: number; rows: BulkSendRow[] }> {
  const where = ['b.company_id = $1'];
  const params: unknown[] = [companyId];
  if (filters.status) {
    params.push(filters.status);
    where.push(`b.status = $${params.length}`);
  }
  if (filters.templateId !== undefined) {
    params.push(filters.templateId);
    where.push(`b.template_id = $${params.length}`);
  }
  if (filters.createdAfter) {
    params.push(`${filters.createdAfter}T00:00:00Z`);
    where.push(`b.created_at >= $${params.length}::timestamptz`);
  }
  if (filters.createdBefore) {
    params.push(`${filters.createdBefore}T00:00:00Z`);
    // 24 hours, not '1 day': Postgres adds a day in the session's TimeZone (25 h when it leaves summer time)
    where.push(`b.created_at < $${params.length}::timestamptz + interval '24 hours'`);
  }
  const cond = where.join(' AND ');
  const count = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${S}.bulk_sends b WHERE ${cond}`, params);
  // The page's ids first, skipping `offset` over the company's index entries (bulk_sends_company holds the order's
  // columns: an index-only scan once the rows are all-visible), then only the page's rows read whole and joined.
  // Before review 22 every skipped bulk was read whole (and, on the planner's bitmap plan, sorted: a deep page of
  // 20,000 spilled 3 MB to disk). Same rows, same order.
  const rows = await pool.query(
    `WITH page AS (SELECT b.bulk_id, b.created_at FROM ${S}.bulk_sends b WHERE ${cond}
                    ORDER BY b.created_at DESC, b.bulk_id LIMIT $${params.length + 1} OFFSET $${params.length + 2})
     ${SELECT_BULK} JOIN page ON page.bulk_id = b.bulk_id ORDER BY page.created_at DESC, page.bulk_id`,
    [...params, page.limit, page.offset],
  );
  return { count: count.rows[0].n, rows: rows.rows.map(toBulk) };
}

export interface BulkMessageRow {
  id: number;
  index: number;
  recipientPhone: string;
  status: 'pending' | BulkMessageStatus;
  providerMessageId: string | null;
  variables: Record<string, unknown>;
  processedAt: Date | null;
  deliveredAt: Date | null;
  readAt: Date | null;
  errorMessage: string | null;
}

const toMessage = (r: any): BulkMessageRow => ({
  id: Number(r.id),
  index: r.idx,
  recipientPhone: r.recipient_phone,
  status: r.status,
  providerMessageId: r.provider_message_id,
  variables: r.variables,
  processedAt: r.processed_at,
  deliveredAt: r.delivered_at,
  readAt: r.read_at,
  errorMessage: r.error_message,
});

/**
 * A page of a bulk send's messages in submission order: the recipients already processed (a recipient not
 * yet sent to has no message yet), optionally of one status.
 */
export async function listBulkMessages(
  pool: Pool,
  bulkId: string,
  status: BulkMessageStatus | undefined,
  page: { offset: number; limit: number },
): Promise<{ count: number; rows: BulkMessageRow[] }> {
  const cond = status ? 'bulk_id = $1 AND status = $2' : `bulk_id = $1 AND status <> 'pending' AND $2::text IS NULL`;
  const params = [bulkId, status ?? null];
  const count = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${S}.messages WHERE ${cond}`, params);
  const rows = await pool.query(
    `SELECT id, idx, recipient_phone, status, provider_message_id, variables, processed_at, delivered_at, read_at, error_message
       FROM ${S}.messages WHERE ${cond} ORDER BY idx LIMIT $3 OFFSET $4`,
    [...params, page.limit, page.offset],
  );
  return { count: count.rows[0].n, rows: rows.rows.map(toMessage) };
}

/** The bulk recipient that owns a provider message id (delivery statuses). */
export async function findBulkMessageByProviderId(
  pool: Pool,
  providerMessageId: string,
): Promise<{ bulkId: string; companyId: number; chunk: number; index: number; status: BulkMessageRow['status'] } | undefined> {
  const r = await pool.query(
    `SELECT m.bulk_id, b.company_id, m.chunk, m.idx, m.status
       FROM ${S}.messages m JOIN ${S}.bulk_sends b ON b.bulk_id = m.bulk_id
      WHERE m.provider_message_id = $1`,
    [providerMessageId],
  );
  const row = r.rows[0];
  return row ? { bulkId: row.bulk_id, companyId: row.company_id, chunk: row.chunk, index: row.idx, status: row.status } : undefined;
}
