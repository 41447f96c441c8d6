import type { PoolClient } from 'pg';
import { type Projection, serialPast } from '../projection';
import { queryNamed } from '../../shared/tx';
import type { BulkEvent } from '../../events/bulk';

export const BULK_SCHEMA = 'rm_bulk';

/** A failed bulk message's error_message (the item and its message.failed webhook): the provider's, else its code. */
export const bulkFailureMessage = (errorCode: string | null, errorMessage: string | null): string =>
  errorMessage ?? (errorCode ? `provider error ${errorCode}` : 'failed');

/**
 * Read model `bulk`: bulk sends with their counters, and one row per deduplicated recipient (the bulk message
 * items). Counters change in the same statement as the row they count (one round trip per event: a
 * data-modifying CTE updates the row and, only when the row actually changed, the counters), so in every
 * committed state they equal the aggregates of the rows (docs/bulk.md, "Counters"); an outcome event of a
 * whole window is one set-based statement:
 *   pending_count   = rows with status pending
 *   sent_count      = rows the provider accepted (accepted_at set: sent, delivered, read, or failed later)
 *   delivered_count = rows with delivered_at set
 *   read_count      = rows with read_at set
 *   failed_count    = rows with status failed (refused, interrupted, or failed after acceptance)
 * Every update is guarded by the row's current status, so redelivered events change nothing and statuses
 * only move forward (pending → sent → delivered → read; failed from pending, sent or delivered).
 * `messages.id` is the spec's integer id, assigned by the insert of a chunk's rows (the highest id plus the rank,
 * the column's sequence moved past them for an earlier version's process): a rolled-back batch and a redelivered
 * chunk take none, so a rebuild assigns the same ids (docs/core.md).
 */
export const bulkProjection: Projection = {
  name: 'bulk',
  version: 1,
  schema: BULK_SCHEMA,
  handles: [
    'BulkRecipientsAdded', 'BulkSendCreated', 'BulkSendStarted', 'BulkSendPaused', 'BulkSendResumed', 'BulkSendCancelled',
    'BulkSendFinished', 'BulkRecipientsDispatched', 'BulkRecipientsRejected', 'BulkRecipientStatusRecorded',
  ],
  ddl: `
    CREATE TABLE IF NOT EXISTS bulk_sends (
      bulk_id              uuid PRIMARY KEY,
      task_id              text NOT NULL,
      company_id           integer NOT NULL,
      created_by_user_id   integer,
      number_id            integer NOT NULL,
      phone_number_id      text NOT NULL,
      display_phone_number text NOT NULL,
      verified_name        text NOT NULL,
      tier                 text NOT NULL,
      template_id          integer NOT NULL,
      template_name        text NOT NULL,
      language             text NOT NULL,
      template_status      text NOT NULL,
      status               text NOT NULL,
      paused               boolean NOT NULL DEFAULT false,
      submitted_recipients integer NOT NULL,
      total_recipients     integer NOT NULL,
      pending_count        integer NOT NULL,
      sent_count           integer NOT NULL DEFAULT 0,
      delivered_count      integer NOT NULL DEFAULT 0,
      read_count           integer NOT NULL DEFAULT 0,
      failed_count         integer NOT NULL DEFAULT 0,
      created_at           timestamptz NOT NULL,
      started_at           timestamptz,
      paused_at            timestamptz,
      completed_at         timestamptz
    );
    CREATE INDEX IF NOT EXISTS bulk_sends_company ON bulk_sends (company_id, created_at DESC, bulk_id);
    CREATE TABLE IF NOT EXISTS messages (
      id                  bigserial PRIMARY KEY,
      bulk_id             uuid NOT NULL,
      chunk               integer NOT NULL,
      idx                 integer NOT NULL,
      recipient_phone     text NOT NULL,
      variables           jsonb NOT NULL,
      status              text NOT NULL DEFAULT 'pending',
      provider_message_id text,
      processed_at        timestamptz,
      accepted_at         timestamptz,
      delivered_at        timestamptz,
      read_at             timestamptz,
      failed_at           timestamptz,
      error_code          text,
      error_message       text,
      UNIQUE (bulk_id, idx)
    );
    CREATE INDEX IF NOT EXISTS messages_status ON messages (bulk_id, status, idx);
    CREATE INDEX IF NOT EXISTS messages_provider_id ON messages (provider_message_id) WHERE provider_message_id IS NOT NULL;`,

  async apply(tx, event) {
    const e = { type: event.type, data: event.data } as BulkEvent;
    switch (e.type) {
      case 'BulkRecipientsAdded': {
        const d = e.data;
        const first = d.recipients[0].index;
        await tx.query(
          `WITH inserted AS (
             INSERT INTO messages (id, bulk_id, chunk, idx, recipient_phone, variables)
             SELECT (SELECT COALESCE(max(m.id), 0) FROM messages m) + row_number() OVER (ORDER BY r.idx), $1, $2, r.idx, r.phone, r.variables
               FROM jsonb_to_recordset($3::jsonb) AS r(idx integer, phone text, variables jsonb)
              WHERE NOT EXISTS (SELECT 1 FROM messages WHERE bulk_id = $1 AND idx = $4)
              ORDER BY r.idx
             RETURNING id)
           SELECT ${serialPast('messages', 'id', '(SELECT max(id) FROM inserted)')}`,
          [d.bulkId, d.chunk, JSON.stringify(d.recipients.map((r) => ({ idx: r.index, phone: r.phone, variables: r.variables }))), first],
        );
        return;
      }
      case 'BulkSendCreated': {
        const d = e.data;
        await tx.query(
          `INSERT INTO bulk_sends (bulk_id, task_id, company_id, created_by_user_id, number_id, phone_number_id, display_phone_number,
                                   verified_name, tier, template_id, template_name, language, template_status, status,
                                   submitted_recipients, total_recipients, pending_count, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'QUEUED', $14, $15, $15, $16)
           ON CONFLICT (bulk_id) DO NOTHING`,
          [d.bulkId, d.taskId, d.companyId, d.createdByUserId, d.numberId, d.phoneNumberId, d.displayPhoneNumber, d.verifiedName, d.tier,
            d.templateId, d.templateName, d.language, d.templateStatus, d.totalRecipients, d.uniqueRecipients, d.createdAt],
        );
        return;
      }
      case 'BulkSendStarted':
        await tx.query(
          `UPDATE bulk_sends SET status = 'PROCESSING', started_at = COALESCE(started_at, $2) WHERE bulk_id = $1 AND status = 'QUEUED'`,
          [e.data.bulkId, e.data.at],
        );
        return;
      case 'BulkSendPaused':
        await tx.query(`UPDATE bulk_sends SET paused = true, paused_at = $2 WHERE bulk_id = $1 AND status = 'PROCESSING'`, [e.data.bulkId, e.data.at]);
        return;
      case 'BulkSendResumed':
        await tx.query(`UPDATE bulk_sends SET paused = false, paused_at = NULL WHERE bulk_id = $1`, [e.data.bulkId]);
        return;
      case 'BulkSendCancelled':
        await tx.query(
          `UPDATE bulk_sends SET status = 'CANCELLED', paused = false, paused_at = NULL, completed_at = $2
            WHERE bulk_id = $1 AND status IN ('QUEUED', 'PROCESSING')`,
          [e.data.bulkId, e.data.at],
        );
        return;
      case 'BulkSendFinished':
        await tx.query(
          `UPDATE bulk_sends SET status = $2, paused = false, paused_at = NULL, completed_at = $3,
                                 started_at = COALESCE(started_at, $3)
            WHERE bulk_id = $1 AND status IN ('QUEUED', 'PROCESSING')`,
          [e.data.bulkId, e.data.status, e.data.at],
        );
        return;
      case 'BulkRecipientsDispatched': {
        // per-row values by position in parallel arrays: the rows are found by index lookups whatever the
        // table's statistics say (a join against a record set may be planned as a hash of every pending row)
        const d = e.data;
        const r = d.recipients;
        await tx.query(
          `WITH m AS (
             UPDATE messages m SET status = 'sent', provider_message_id = ($3::text[])[array_position($2::int[], m.idx)],
                                   processed_at = ($4::timestamptz[])[array_position($2::int[], m.idx)],
                                   accepted_at = ($4::timestamptz[])[array_position($2::int[], m.idx)]
              WHERE m.bulk_id = $1 AND m.idx = ANY($2::int[]) AND m.status = 'pending' RETURNING 1),
           n AS (SELECT count(*)::int AS n FROM m)
           UPDATE bulk_sends SET sent_count = sent_count + n.n, pending_count = pending_count - n.n FROM n
            WHERE bulk_id = $1 AND n.n > 0`,
          [d.bulkId, r.map((x) => x.index), r.map((x) => x.providerMessageId), r.map((x) => x.at)],
        );
        return;
      }
      case 'BulkRecipientsRejected': {
        const d = e.data;
        const r = d.recipients;
        await tx.query(
          `WITH m AS (
             UPDATE messages m SET status = 'failed', processed_at = ($3::timestamptz[])[array_position($2::int[], m.idx)],
                                   failed_at = ($3::timestamptz[])[array_position($2::int[], m.idx)],
                                   error_code = ($4::text[])[array_position($2::int[], m.idx)],
                                   error_message = ($5::text[])[array_position($2::int[], m.idx)]
              WHERE m.bulk_id = $1 AND m.idx = ANY($2::int[]) AND m.status = 'pending' RETURNING 1),
           n AS (SELECT count(*)::int AS n FROM m)
           UPDATE bulk_sends SET failed_count = failed_count + n.n, pending_count = pending_count - n.n FROM n
            WHERE bulk_id = $1 AND n.n > 0`,
          [d.bulkId, r.map((x) => x.index), r.map((x) => x.at), r.map((x) => x.code), r.map((x) => x.message)],
        );
        return;
      }
      case 'BulkRecipientStatusRecorded': {
        const d = e.data;
        if (d.status === 'delivered') {
          await tx.query(
            `WITH m AS (
               UPDATE messages SET status = 'delivered', delivered_at = $3
                WHERE bulk_id = $1 AND idx = $2 AND status = 'sent' RETURNING 1)
             UPDATE bulk_sends SET delivered_count = delivered_count + 1 WHERE bulk_id = $1 AND EXISTS (SELECT 1 FROM m)`,
            [d.bulkId, d.index, d.at],
          );
        } else if (d.status === 'read') {
          // a read without delivered implies delivered (delivered_at = the read's time)
          await tx.query(
            `WITH m AS (
               UPDATE messages SET status = 'read', read_at = $3, delivered_at = COALESCE(delivered_at, $3)
                WHERE bulk_id = $1 AND idx = $2 AND status IN ('sent', 'delivered')
                RETURNING (SELECT o.delivered_at IS NULL FROM messages o WHERE o.bulk_id = $1 AND o.idx = $2) AS newly_delivered)
             UPDATE bulk_sends SET read_count = read_count + 1,
                                   delivered_count = delivered_count + CASE WHEN (SELECT newly_delivered FROM m) THEN 1 ELSE 0 END
              WHERE bulk_id = $1 AND EXISTS (SELECT 1 FROM m)`,
            [d.bulkId, d.index, d.at],
          );
        } else {
          await tx.query(
            `WITH m AS (
               UPDATE messages SET status = 'failed', failed_at = $3, error_code = $4, error_message = $5
                WHERE bulk_id = $1 AND idx = $2 AND status IN ('sent', 'delivered') RETURNING 1)
             UPDATE bulk_sends SET failed_count = failed_count + 1 WHERE bulk_id = $1 AND EXISTS (SELECT 1 FROM m)`,
            [d.bulkId, d.index, d.at, d.errorCode, bulkFailureMessage(d.errorCode, d.errorMessage)],
          );
        }
        return;
      }
      default:
        return;
    }
  },
  /**
   * Runs of BulkRecipientStatusRecorded in set-based statements: a run is cut where a recipient comes again, so
   * each statement moves every recipient at most once and its order inside does not matter; every other event
   * one by one, in order, between runs. The rules (guards, times, counters) are apply's.
   */
  async applyBatch(tx, events) {
    let run: StatusData[] = [];
    let recipients = new Set<string>();
    const flush = async () => {
      if (run.length > 0) await recordStatuses(tx, run);
      run = [];
      recipients = new Set();
    };
    for (const event of events) {
      if (event.type !== 'BulkRecipientStatusRecorded') {
        await flush();
        await bulkProjection.apply(tx, event);
        continue;
      }
      const d = event.data as StatusData;
      const key = `${d.bulkId}:${d.index}`;
      if (recipients.has(key)) await flush();
      recipients.add(key);
      run.push(d);
    }
    await flush();
  },
};

type StatusData = Extract<BulkEvent, { type: 'BulkRecipientStatusRecorded' }>['data'];

/** Statuses of distinct recipients in one statement, with apply's guards and counters. */
async function recordStatuses(tx: PoolClient, statuses: readonly StatusData[]): Promise<void> {
  await queryNamed(tx, 'bulk_record_statuses',
    `WITH u AS (
       SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::timestamptz[], $5::text[], $6::text[])
         AS u(bulk_id, idx, status, at, error_code, error_message)
     ), m AS (
       UPDATE messages m
          SET status = u.status,
              delivered_at = CASE u.status WHEN 'delivered' THEN u.at WHEN 'read' THEN COALESCE(m.delivered_at, u.at) ELSE m.delivered_at END,
              read_at = CASE WHEN u.status = 'read' THEN u.at ELSE m.read_at END,
              failed_at = CASE WHEN u.status = 'failed' THEN u.at ELSE m.failed_at END,
              error_code = CASE WHEN u.status = 'failed' THEN u.error_code ELSE m.error_code END,
              error_message = CASE WHEN u.status = 'failed' THEN u.error_message ELSE m.error_message END
         FROM u
        WHERE m.bulk_id = u.bulk_id AND m.idx = u.idx
          AND (m.status = 'sent' OR (m.status = 'delivered' AND u.status IN ('read', 'failed')))
       RETURNING m.bulk_id, u.status,
                 u.status = 'read' AND (SELECT o.delivered_at IS NULL FROM messages o WHERE o.bulk_id = m.bulk_id AND o.idx = m.idx) AS newly_delivered
     ), c AS (
       SELECT bulk_id,
              count(*) FILTER (WHERE status = 'delivered' OR newly_delivered)::int AS delivered,
              count(*) FILTER (WHERE status = 'read')::int AS read,
              count(*) FILTER (WHERE status = 'failed')::int AS failed
         FROM m GROUP BY bulk_id
     )
     UPDATE bulk_sends b SET delivered_count = b.delivered_count + c.delivered, read_count = b.read_count + c.read,
                             failed_count = b.failed_count + c.failed
       FROM c WHERE b.bulk_id = c.bulk_id`,
    [
      statuses.map((d) => d.bulkId), statuses.map((d) => d.index), statuses.map((d) => d.status), statuses.map((d) => d.at),
      statuses.map((d) => (d.status === 'failed' ? d.errorCode : null)),
      statuses.map((d) => (d.status === 'failed' ? bulkFailureMessage(d.errorCode, d.errorMessage) : null)),
    ],
  );
}
