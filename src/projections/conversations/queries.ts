import type { Pool } from 'pg';
import { CONVERSATIONS_SCHEMA as S } from './projection';

/** What the message recorder validates a company's messages against. */
export interface CompanyDirectory {
  companyKnown: boolean;
  agentIds: ReadonlySet<number>;
  operatorIds: ReadonlySet<number>;
}

export async function loadCompanyDirectories(pool: Pool, companyIds: readonly number[]): Promise<Map<number, CompanyDirectory>> {
  const out = new Map<number, CompanyDirectory>();
  for (const id of companyIds) out.set(id, { companyKnown: false, agentIds: new Set(), operatorIds: new Set() });
  if (companyIds.length === 0) return out;
  const r = await pool.query<{ kind: 'company' | 'agent' | 'operator'; company_id: number; id: number | null }>(
    `SELECT 'company' AS kind, company_id, NULL::integer AS id FROM ${S}.companies WHERE company_id = ANY($1::int[])
     UNION ALL SELECT 'agent', company_id, agent_id FROM ${S}.agents WHERE company_id = ANY($1::int[])
     UNION ALL SELECT 'operator', company_id, operator_id FROM ${S}.operators WHERE company_id = ANY($1::int[])`,
    [companyIds],
  );
  for (const row of r.rows) {
    const d = out.get(row.company_id)!;
    if (row.kind === 'company') d.companyKnown = true;
    else if (row.kind === 'agent') (d.agentIds as Set<number>).add(row.id!);
    else (d.operatorIds as Set<number>).add(row.id!);
  }
  return out;
}

/** The conversation each of these (company, message id) pairs is already recorded in, where it is. */
export async function findRecordedConversations(
  pool: Pool,
  keys: ReadonlyArray<{ companyId: number; messageId: string }>,
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (keys.length === 0) return out;
  const r = await pool.query<{ company_id: number; message_id: string; conversation_id: string }>(
    `SELECT m.company_id, m.message_id, m.conversation_id
       FROM unnest($1::int[], $2::text[]) AS k(company_id, message_id)
       JOIN ${S}.messages m ON m.company_id = k.company_id AND m.message_id = k.message_id`,
    [keys.map((k) => k.companyId), keys.map((k) => k.messageId)],
  );
  for (const row of r.rows) out.set(messageKey(row.company_id, row.message_id), row.conversation_id);
  return out;
}

export const messageKey = (companyId: number, messageId: string): string => `${companyId}\u0000${messageId}`;

export interface ReplyStats {
  contactPhone: string;
  firstReplyAt: Date;
  lastReplyAt: Date;
  inboundCount: number;
}

/**
 * Inbound-message stats of a contact, by any of its stored phone forms (`phoneVariants`): whether and when the
 * contact last wrote (contact lookup: `hasReplied`, `lastReplyAt`, session window). Undefined when it never wrote.
 */
export async function findReplyStats(pool: Pool, companyId: number, phones: readonly string[]): Promise<ReplyStats | undefined> {
  const r = await pool.query<{ first: Date; last: Date; n: string }>(
    `SELECT min(first_reply_at) AS first, max(last_reply_at) AS last, sum(inbound_count) AS n
       FROM ${S}.reply_stats WHERE company_id = $1 AND contact_phone = ANY($2::text[])`,
    [companyId, phones],
  );
  const row = r.rows[0];
  if (!row || row.last === null) return undefined;
  return { contactPhone: phones[0], firstReplyAt: row.first, lastReplyAt: row.last, inboundCount: Number(row.n) };
}
