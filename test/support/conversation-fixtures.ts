import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { ConversationRecorder, type RecordOutcome } from '../../src/commands/conversation/handler';
import { parseMessageRecord, type MessageRecordInput } from '../../src/commands/conversation/message-input';
import { type EventToAppend, type Position, START } from '../../src/ports/event-store';
import { apiKeysProjection } from '../../src/projections/apikeys/projection';
import { conversationsProjection } from '../../src/projections/conversations/projection';
import type { Services } from '../../src/services';
import { hashApiKey, keyIdFromHash } from '../../src/shared/api-key';
import { TEST_PEPPER } from './services';

// Provisioning for the conversation/export suites, appended as provisioning events (independent of `seed`).

const ev = (type: string, data: unknown, companyId: number | null): EventToAppend => ({
  type,
  data,
  metadata: { eventId: randomUUID(), correlationId: randomUUID(), causationId: null, companyId, actor: 'test', at: new Date().toISOString() },
});

export interface CompanySetup {
  companyId: number;
  agents?: Array<{ id: number; name: string; version: string }>;
  operators?: Array<{ id: number; name: string }>;
  /** company API keys (`sbk_…`) */
  keys?: string[];
}

// The positions of what the helpers appended, per services: `settle` waits for them. (The store's head is not
// enough: it only covers events below the oldest transaction running anywhere in the cluster.)
const appended = new WeakMap<Services, Position>();
function note(services: Services, position: Position | undefined): void {
  if (position === undefined) return;
  const prev = appended.get(services);
  if (prev === undefined || services.store.comparePositions(position, prev) > 0) appended.set(services, position);
}

/** The position of the last event the helpers appended for these services. */
export const lastAppended = (services: Services): Position | undefined => appended.get(services);

export async function provisionCompany(services: Services, c: CompanySetup): Promise<void> {
  const profile = {
    companyId: c.companyId, name: `Company ${c.companyId}`, email: `c${c.companyId}@example.test`, phone: '+541140000000',
    website: 'https://example.test', address: 'Somewhere 1', description: 'test company', timezone: 'America/Argentina/Buenos_Aires',
    companySize: 'SMALL', companyTypes: ['ECOMMERCE'], categories: [],
  };
  const events = [ev('CompanyRegistered', profile, c.companyId)];
  for (const a of c.agents ?? []) events.push(ev('AgentRegistered', { companyId: c.companyId, agentId: a.id, name: a.name, version: a.version }, c.companyId));
  for (const o of c.operators ?? []) events.push(ev('OperatorRegistered', { companyId: c.companyId, operatorId: o.id, name: o.name }, c.companyId));
  note(services, (await services.store.append(`company-${c.companyId}`, events, 'any')).position);
  for (const key of c.keys ?? []) await issueKey(services, key, c.companyId);
}

/** Issues a company key (companyId given) or a global key (`sbk_global_…`, companyId null). */
export async function issueKey(services: Services, key: string, companyId: number | null, expiresAt: string | null = null): Promise<void> {
  const keyHash = hashApiKey(TEST_PEPPER, key);
  const keyId = keyIdFromHash(keyHash);
  const r = await services.store.append(
    `apikey-${keyId}`,
    [ev('ApiKeyIssued', { keyId, scope: companyId === null ? 'global' : 'company', companyId, userId: null, name: `key ${keyId}`, keyHash, expiresAt }, companyId)],
    'any',
  );
  note(services, r.position);
}

/** Waits until the read models these suites use (api keys, conversations) have applied everything appended. */
export async function settle(services: Services): Promise<void> {
  const head = await services.store.headPosition();
  const mine = appended.get(services);
  const target = mine !== undefined && (head === START || services.store.comparePositions(mine, head) > 0) ? mine : head;
  if (target === START) return;
  await services.runner.waitFor(target, [apiKeysProjection, conversationsProjection], 30_000);
}

let counter = 0;
/** A valid record of the input contract; override what the test is about. */
export function messageRecord(over: Partial<MessageRecordInput> & { companyId: number }): MessageRecordInput {
  counter++;
  return {
    id: `real-msg-${counter}`,
    conversationId: 'real-conv-1',
    occurredAt: '2024-01-10T10:00:00.000Z',
    channel: 'PROVIDER_MSGAPP',
    direction: 'inbound',
    author: { type: 'contact', contactId: 918273 },
    contactPhone: '+5491122334455',
    content: { type: 'text', text: 'hello', mediaUrl: null, mediaMime: null },
    replyToMessageId: null,
    classifications: [],
    extractions: [],
    toolCalls: [],
    traceId: null,
    deleted: false,
    ...over,
  };
}

/** Records contract records through the real command handler; throws on a record the contract rejects. */
export async function recordMessages(services: Services, records: MessageRecordInput[]): Promise<RecordOutcome[]> {
  const messages = records.map((r) => {
    const p = parseMessageRecord(r);
    if (!p.ok) throw new Error(`test record ${r.id} is invalid: ${p.reason}`);
    return p.message;
  });
  const { outcomes, position } = await new ConversationRecorder(services).record(messages, { actor: 'test' });
  note(services, position);
  return outcomes;
}

/** NDJSON body → parsed lines. */
export const ndjson = (body: string): any[] => body.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));

/**
 * Inserts `count` synthetic export rows straight into the read model (memory and streaming tests: not an
 * ingestion test). Message i (1-based) occurs at start + i * step; every other row is an AI-agent reply.
 */
export async function insertSyntheticRows(
  pool: Pool,
  o: { companyId: number; count: number; start: string; stepMs: number; textBytes?: number; prefix?: string },
): Promise<void> {
  const chunk = 200_000;
  for (let offset = 0; offset < o.count; offset += chunk) {
    await pool.query(
      `INSERT INTO rm_conversations.messages (company_id, message_id, seq, conversation_id, occurred_at, channel, direction, author_type,
         author_contact_id, author_agent_id, author_operator_id, contact_phone, agent_name, agent_version, content_type, content_text,
         media_url, media_mime, reply_to_message_id, classifications, extractions, tool_calls, trace_id)
       SELECT $1, $2 || i, base.s + i - $6, $2 || 'conv-' || (i / 20), $3::timestamptz + i * ($4 * interval '1 millisecond'),
              (ARRAY['PROVIDER_MSGAPP','MSGAPP_GATEWAY','PHOTOAPP','SOCIALMSG','FLOWTOOL_MSGAPP','FLOWTOOL_PHOTOAPP'])[1 + i % 6],
              CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, CASE WHEN i % 2 = 0 THEN 'contact' ELSE 'agent' END,
              CASE WHEN i % 2 = 0 THEN 1000 + i % 5000 END, CASE WHEN i % 2 = 1 THEN 7 END, NULL,
              CASE WHEN i % 2 = 0 THEN '+5491100000000' END, CASE WHEN i % 2 = 1 THEN 'Bench Bot' END, CASE WHEN i % 2 = 1 THEN '1.0' END,
              'text', CASE WHEN $5::int > 0 THEN repeat('x', $5::int) ELSE 'Hola, quiero saber el estado de mi pedido numero ' || i END,
              NULL, NULL, CASE WHEN i % 3 = 0 THEN $2 || (i - 1) END,
              '[{"label":"intent","value":"order_status"}]', '[{"key":"order_id","value":"A-1"}]',
              '[{"tool_name":"lookup_order","success":true,"execution_time_ms":12}]', CASE WHEN i % 2 = 1 THEN 'trace-' || i END
         FROM generate_series($6 + 1, LEAST($6 + $7, $8)) i, (SELECT COALESCE(max(seq), 0) AS s FROM rm_conversations.messages) base`,
      [o.companyId, o.prefix ?? 'syn-', o.start, o.stepMs, o.textBytes ?? 0, offset, chunk, o.count],
    );
  }
}
