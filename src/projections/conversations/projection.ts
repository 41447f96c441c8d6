import type { PoolClient } from 'pg';
import type { Projection } from '../projection';
import { queryNamed } from '../../shared/tx';
import type { ConversationEvent } from '../../events/conversations';
import type { ProvisioningEvent } from '../../events/provisioning';
import type { BulkEvent, BulkEventData } from '../../events/bulk';
import { outboundTemplateMessage } from '../../events/template-messages';

// Read model `conversations` (schema rm_conversations): the export rows of chat messages with their REAL ids
// (anonymization happens on the way out, src/http/routes/export.ts), reply stats per contact phone, and the
// small directory the message recorder validates against (companies, agents, operators of each company).
//
// messages.seq is a gapless, deterministic ingestion counter (the n-th message inserted, in log order): it
// bounds a paged export to the rows visible when its first page was served (docs/export.md). Exactly one
// process applies a projection (advisory lock), so `max(seq) + 1` is race-free, and a rebuild replays the
// same log in the same order, so it yields the same seq for every message.

export const CONVERSATIONS_SCHEMA = 'rm_conversations';

type Handled =
  | ConversationEvent
  | Extract<ProvisioningEvent, { type: 'CompanyRegistered' | 'AgentRegistered' | 'AgentChanged' | 'OperatorRegistered' | 'OperatorChanged' }>
  | Extract<BulkEvent, { type: 'BulkRecipientsAdded' | 'BulkSendCreated' | 'BulkRecipientsDispatched' | 'BulkRecipientsRejected' }>;

export const conversationsProjection: Projection = {
  name: 'conversations',
  version: 2,
  schema: CONVERSATIONS_SCHEMA,
  handles: [
    'CompanyRegistered', 'AgentRegistered', 'AgentChanged', 'OperatorRegistered', 'OperatorChanged', 'MessageRecorded', 'MessageDeleted',
    'MessageRestored', 'BulkRecipientsAdded', 'BulkSendCreated', 'BulkRecipientsDispatched', 'BulkRecipientsRejected',
  ],
  ddl: `
    CREATE TABLE IF NOT EXISTS companies (
      company_id integer PRIMARY KEY
    );
    CREATE TABLE IF NOT EXISTS agents (
      company_id integer NOT NULL,
      agent_id   integer NOT NULL,
      name       text    NOT NULL,
      version    text    NOT NULL,
      PRIMARY KEY (company_id, agent_id)
    );
    CREATE TABLE IF NOT EXISTS operators (
      company_id  integer NOT NULL,
      operator_id integer NOT NULL,
      name        text    NOT NULL,
      PRIMARY KEY (company_id, operator_id)
    );
    CREATE TABLE IF NOT EXISTS messages (
      company_id          integer     NOT NULL,
      message_id          text        COLLATE "C" NOT NULL,
      seq                 bigint      NOT NULL,
      conversation_id     text        NOT NULL,
      occurred_at         timestamptz NOT NULL,
      channel             text        NOT NULL,
      direction           text        NOT NULL,
      author_type         text        NOT NULL,
      author_contact_id   integer,
      author_agent_id     integer,
      author_operator_id  integer,
      contact_phone       text,
      agent_name          text,
      agent_version       text,
      content_type        text        NOT NULL,
      content_text        text        NOT NULL,
      media_url           text,
      media_mime          text,
      reply_to_message_id text,
      classifications     json        NOT NULL,
      extractions         json        NOT NULL,
      tool_calls          json        NOT NULL,
      trace_id            text,
      deleted             boolean     NOT NULL DEFAULT false,
      PRIMARY KEY (company_id, message_id)
    );
    CREATE UNIQUE INDEX IF NOT EXISTS messages_seq ON messages (seq);
    CREATE INDEX IF NOT EXISTS messages_export ON messages (company_id, occurred_at, message_id);
    CREATE INDEX IF NOT EXISTS messages_agent_unnamed ON messages (company_id, author_agent_id)
      WHERE author_agent_id IS NOT NULL AND agent_name IS NULL;
    CREATE TABLE IF NOT EXISTS reply_stats (
      company_id     integer     NOT NULL,
      contact_phone  text        NOT NULL,
      first_reply_at timestamptz NOT NULL,
      last_reply_at  timestamptz NOT NULL,
      inbound_count  integer     NOT NULL,
      PRIMARY KEY (company_id, contact_phone)
    );
    CREATE TABLE IF NOT EXISTS bulk_templates (
      bulk_id         uuid    PRIMARY KEY,
      company_id      integer NOT NULL,
      phone_number_id text    NOT NULL,
      template_name   text    NOT NULL,
      language        text    NOT NULL
    );
    CREATE TABLE IF NOT EXISTS bulk_pending (
      bulk_id   uuid    NOT NULL,
      idx       integer NOT NULL,
      variables jsonb   NOT NULL,
      PRIMARY KEY (bulk_id, idx)
    );`,
  async apply(tx, event) {
    const e = { type: event.type, data: event.data } as Handled;
    switch (e.type) {
      case 'CompanyRegistered':
        await tx.query('INSERT INTO companies (company_id) VALUES ($1) ON CONFLICT DO NOTHING', [e.data.companyId]);
        return;
      case 'AgentRegistered':
      case 'AgentChanged':
        await tx.query(
          `INSERT INTO agents (company_id, agent_id, name, version) VALUES ($1, $2, $3, $4)
           ON CONFLICT (company_id, agent_id) DO UPDATE SET name = $3, version = $4`,
          [e.data.companyId, e.data.agentId, e.data.name, e.data.version],
        );
        // messages recorded before their agent was known get the agent's name and version now
        await tx.query(
          `UPDATE messages SET agent_name = $3, agent_version = $4
            WHERE company_id = $1 AND author_agent_id = $2 AND agent_name IS NULL`,
          [e.data.companyId, e.data.agentId, e.data.name, e.data.version],
        );
        return;
      case 'OperatorRegistered':
      case 'OperatorChanged':
        await tx.query(
          `INSERT INTO operators (company_id, operator_id, name) VALUES ($1, $2, $3)
           ON CONFLICT (company_id, operator_id) DO UPDATE SET name = $3`,
          [e.data.companyId, e.data.operatorId, e.data.name],
        );
        return;
      case 'MessageRecorded':
        // The agent's name and version as they are when the message is recorded (the version that wrote it).
        // Reply stats change only when the row is really inserted (a redelivered event changes nothing).
        await insertMessages(tx, [e.data]);
        return;
      case 'MessageDeleted':
        await tx.query(
          'UPDATE messages SET deleted = true WHERE company_id = $1 AND message_id = $2 AND conversation_id = $3 AND NOT deleted',
          [e.data.companyId, e.data.messageId, e.data.conversationId],
        );
        return;
      case 'MessageRestored':
        // the row keeps its seq, content and time (those of the first record)
        await tx.query(
          'UPDATE messages SET deleted = false WHERE company_id = $1 AND message_id = $2 AND conversation_id = $3 AND deleted',
          [e.data.companyId, e.data.messageId, e.data.conversationId],
        );
        return;
      case 'BulkRecipientsAdded':
        // Every chunk precedes its BulkSendCreated in the log: a chunk seen after it is a redelivery, whose
        // recipients may have had their outcome already.
        await tx.query(
          `INSERT INTO bulk_pending (bulk_id, idx, variables)
           SELECT $1, r.idx, r.variables FROM jsonb_to_recordset($2::jsonb) AS r(idx integer, variables jsonb)
            WHERE NOT EXISTS (SELECT 1 FROM bulk_templates WHERE bulk_id = $1)
           ON CONFLICT DO NOTHING`,
          [e.data.bulkId, JSON.stringify(e.data.recipients.map((r) => ({ idx: r.index, variables: r.variables })))],
        );
        return;
      case 'BulkSendCreated':
        await tx.query(
          `INSERT INTO bulk_templates (bulk_id, company_id, phone_number_id, template_name, language) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT DO NOTHING`,
          [e.data.bulkId, e.data.companyId, e.data.phoneNumberId, e.data.templateName, e.data.language],
        );
        return;
      case 'BulkRecipientsDispatched':
        await insertMessages(tx, await bulkOutboundMessages(tx, e.data));
        await forgetBulkRecipients(tx, e.data.bulkId, e.data.recipients);
        return;
      case 'BulkRecipientsRejected':
        await forgetBulkRecipients(tx, e.data.bulkId, e.data.recipients);
        return;
    }
  },
  /**
   * Runs of consecutive MessageRecorded events in one statement (ids new to the table, first occurrence wins, seq
   * numbered in log order, reply stats summed per contact); every other event one by one, in order, between runs.
   */
  async applyBatch(tx, events) {
    let run: MessageRecordedData[] = [];
    const flush = async () => {
      if (run.length > 0) await insertMessages(tx, run);
      run = [];
    };
    for (const event of events) {
      if (event.type === 'MessageRecorded') {
        run.push(event.data as MessageRecordedData);
        continue;
      }
      await flush();
      await conversationsProjection.apply(tx, event);
    }
    await flush();
  },
};

type MessageRecordedData = Extract<ConversationEvent, { type: 'MessageRecorded' }>['data'];

/** The outbound messages of the dispatched recipients still pending here (none again for a redelivered event). */
async function bulkOutboundMessages(tx: PoolClient, d: BulkEventData<'BulkRecipientsDispatched'>): Promise<MessageRecordedData[]> {
  const { rows } = await tx.query<{ idx: number; variables: Record<string, unknown>; phone_number_id: string; template_name: string; language: string }>(
    `SELECT p.idx, p.variables, t.phone_number_id, t.template_name, t.language
       FROM bulk_pending p JOIN bulk_templates t ON t.bulk_id = p.bulk_id
      WHERE p.bulk_id = $1 AND p.idx = ANY($2::int[])`,
    [d.bulkId, d.recipients.map((r) => r.index)],
  );
  const pending = new Map(rows.map((r) => [r.idx, r]));
  return d.recipients.flatMap((r) => {
    const p = pending.get(r.index);
    if (!p) return [];
    return [outboundTemplateMessage({
      companyId: d.companyId, phoneNumberId: p.phone_number_id, templateName: p.template_name, language: p.language,
      recipientE164: r.recipientE164, variables: p.variables, providerMessageId: r.providerMessageId, at: r.at,
    })];
  });
}

async function forgetBulkRecipients(tx: PoolClient, bulkId: string, recipients: readonly { index: number }[]): Promise<void> {
  await tx.query('DELETE FROM bulk_pending WHERE bulk_id = $1 AND idx = ANY($2::int[])', [bulkId, recipients.map((r) => r.index)]);
}

/** The values of a message row, in the column order of the insert below. */
function messageRow(d: MessageRecordedData): unknown[] {
  return [
    d.companyId, d.messageId, d.conversationId, d.occurredAt, d.channel, d.direction, d.author.type,
    d.author.type === 'contact' ? (d.author.contactId ?? null) : null,
    d.author.type === 'agent' ? (d.author.agentId ?? null) : null,
    d.author.type === 'human_operator' ? (d.author.operatorId ?? null) : null,
    d.contactPhone,
    d.content.type, d.content.text, d.content.mediaUrl, d.content.mediaMime, d.replyToMessageId,
    JSON.stringify(d.classifications.map((c) => ({ label: c.label, value: c.value ?? null }))),
    JSON.stringify(d.extractions.map((x) => ({ key: x.key, value: x.value ?? null }))),
    JSON.stringify(d.toolCalls.map((t) => ({ tool_name: t.toolName, success: t.success, execution_time_ms: t.executionTimeMs }))),
    d.traceId,
  ];
}

const MESSAGE_COLUMN_TYPES = [
  'int', 'text', 'text', 'timestamptz', 'text', 'text', 'text', 'int', 'int', 'int', 'text',
  'text', 'text', 'text', 'text', 'text', 'json', 'json', 'json', 'text',
];

async function insertMessages(tx: PoolClient, messages: MessageRecordedData[]): Promise<void> {
  if (messages.length === 0) return;
  const seen = new Set<string>();
  const rows: unknown[][] = [];
  for (const d of messages) {
    const key = `${d.companyId}|${d.messageId}`;
    if (seen.has(key)) continue; // the one-by-one apply inserts the first and skips the second
    seen.add(key);
    rows.push(messageRow(d));
  }
  const columns = MESSAGE_COLUMN_TYPES.map((_, i) => rows.map((r) => r[i]));
  await queryNamed(tx, 'conversations_insert_messages',
    `WITH u AS (
       SELECT * FROM unnest(${MESSAGE_COLUMN_TYPES.map((t, i) => `$${i + 1}::${t}[]`).join(', ')}) WITH ORDINALITY
         AS u(company_id, message_id, conversation_id, occurred_at, channel, direction, author_type, author_contact_id,
              author_agent_id, author_operator_id, contact_phone, content_type, content_text, media_url, media_mime,
              reply_to_message_id, classifications, extractions, tool_calls, trace_id, ord)
     ), fresh AS (
       SELECT u.*, row_number() OVER (ORDER BY u.ord) AS n FROM u
        WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.company_id = u.company_id AND m.message_id = u.message_id)
     ), ins AS (
       INSERT INTO messages (company_id, message_id, seq, conversation_id, occurred_at, channel, direction, author_type,
                             author_contact_id, author_agent_id, author_operator_id, contact_phone, agent_name, agent_version,
                             content_type, content_text, media_url, media_mime, reply_to_message_id,
                             classifications, extractions, tool_calls, trace_id)
       SELECT f.company_id, f.message_id, (SELECT COALESCE(max(seq), 0) FROM messages) + f.n, f.conversation_id, f.occurred_at,
              f.channel, f.direction, f.author_type, f.author_contact_id, f.author_agent_id, f.author_operator_id, f.contact_phone,
              a.name, a.version, f.content_type, f.content_text, f.media_url, f.media_mime, f.reply_to_message_id,
              f.classifications, f.extractions, f.tool_calls, f.trace_id
         FROM fresh f LEFT JOIN agents a ON a.company_id = f.company_id AND a.agent_id = f.author_agent_id
       RETURNING company_id, contact_phone, direction, occurred_at
     )
     INSERT INTO reply_stats (company_id, contact_phone, first_reply_at, last_reply_at, inbound_count)
     SELECT company_id, contact_phone, min(occurred_at), max(occurred_at), count(*) FROM ins
      WHERE direction = 'inbound' AND contact_phone IS NOT NULL
      GROUP BY company_id, contact_phone
     ON CONFLICT (company_id, contact_phone) DO UPDATE
       SET first_reply_at = LEAST(reply_stats.first_reply_at, EXCLUDED.first_reply_at),
           last_reply_at = GREATEST(reply_stats.last_reply_at, EXCLUDED.last_reply_at),
           inbound_count = reply_stats.inbound_count + EXCLUDED.inbound_count`,
    columns,
  );
}
