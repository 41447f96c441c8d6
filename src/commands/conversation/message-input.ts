import { z } from 'zod';
import { CHANNELS, CONTENT_TYPES } from '../../events/conversations';
import { normalizePhone } from '../../shared/phone';
import { parseIsoInstant } from '../../shared/iso-instant';
import { hasUnstorableText, isStorableInstant, MAX_JSON_DEPTH, nestsDeeperThan } from '../../shared/storable';
import type { MessageToRecord } from './decider';

// The input contract of chat messages (../shared/contracts/conversation-messages.md): one NDJSON line of
// `switchboard import-messages`, one Kafka record of `conversation.messages`. Unknown fields are ignored.

const int32 = z.number().int().min(1).max(2_147_483_647);
const nullableText = z.string().nullable().optional().transform((v) => v ?? null);
/**
 * A platform id, without the blanks around it: stored so since the first version, so a record delivered again is
 * recognised whatever spaces it carries (`" m1"` and `"m1"` are one id); a reply names its message the same way.
 */
const platformId = z.string().trim().min(1, 'is missing').max(512);

const author = z.discriminatedUnion('type', [
  z.object({ type: z.literal('contact'), contactId: int32 }),
  z.object({ type: z.literal('agent'), agentId: int32 }),
  z.object({ type: z.literal('human_operator'), operatorId: int32 }),
  z.object({ type: z.literal('system') }),
], { error: (issue) => (issue.code === 'invalid_union' ? 'must be one of contact, agent, human_operator, system' : undefined) });

export const messageRecordSchema = z.object({
  id: platformId,
  companyId: int32,
  conversationId: platformId,
  occurredAt: z.string({ error: 'must be an ISO 8601 date-time with a time zone' })
    .transform((v, ctx) => {
      const at = parseIsoInstant(v, { zone: 'required' });
      if (!at) ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 date-time with a time zone' });
      else if (!isStorableInstant(at)) ctx.addIssue({ code: 'custom', message: 'must lie in years 0001 to 9999 (UTC)' });
      return at ?? new Date(NaN);
    }),
  channel: z.enum(CHANNELS, { error: `must be one of ${CHANNELS.join(', ')}` }),
  direction: z.enum(['inbound', 'outbound'], { error: 'must be inbound or outbound' }),
  author,
  contactPhone: nullableText,
  content: z.object({
    type: z.enum(CONTENT_TYPES, { error: `must be one of ${CONTENT_TYPES.join(', ')}` }),
    text: z.string().optional().transform((v) => v ?? ''),
    mediaUrl: nullableText,
    mediaMime: nullableText,
  }),
  replyToMessageId: z.string().trim().nullable().optional().transform((v) => (v ? v : null)),
  classifications: z.array(z.object({ label: z.string(), value: z.unknown() })).optional().transform((v) => v ?? []),
  extractions: z.array(z.object({ key: z.string(), value: z.unknown() })).optional().transform((v) => v ?? []),
  toolCalls: z
    .array(z.object({ toolName: z.string(), success: z.boolean(), executionTimeMs: z.number().int().min(0) }))
    .optional()
    .transform((v) => v ?? []),
  traceId: nullableText,
  deleted: z.boolean().optional().transform((v) => v ?? false),
}).superRefine(refuseUnstorableText);

/** Postgres stores no U+0000 and no unpaired surrogate: a field holding one makes the record a bad record. */
function refuseUnstorableText(record: Record<string, unknown>, ctx: z.RefinementCtx): void {
  for (const [field, value] of Object.entries(record)) {
    if (hasUnstorableText(value)) {
      ctx.addIssue({ code: 'custom', path: [field], message: 'contains text that cannot be stored (U+0000 or an unpaired UTF-16 surrogate)' });
    }
  }
}

export type MessageRecordInput = z.input<typeof messageRecordSchema>;

export type ParseResult = { ok: true; message: MessageToRecord } | { ok: false; reason: string };

/** Validates one record of the contract and normalizes it into what the decider records. */
export function parseMessageRecord(value: unknown): ParseResult {
  // before anything recursive: JSON.parse takes any depth, JSON.stringify (the append) overflows the stack on it
  if (nestsDeeperThan(value, MAX_JSON_DEPTH)) return { ok: false, reason: `record: nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels` };
  const parsed = messageRecordSchema.safeParse(value);
  if (!parsed.success) {
    const reason = parsed.error.issues
      .map((i) => `${i.path.length ? i.path.join('.') : 'record'}: ${i.path.length === 0 && i.code === 'invalid_type' ? 'must be a JSON object' : i.message}`)
      .join('; ');
    return { ok: false, reason };
  }
  const r = parsed.data;
  let contactPhone: string | null = null;
  if (r.contactPhone !== null && r.contactPhone.trim() !== '') {
    contactPhone = normalizePhone(r.contactPhone);
    // the reason goes to the dead-letter header and the consumer's warn line: not the value (a customer's phone,
    // docs/reliability.md "What is logged"), which the dead-letter record keeps; its shape says what is wrong
    if (contactPhone === null) return { ok: false, reason: `contactPhone: is not a valid phone number (${phoneShape(r.contactPhone)})` };
  }
  return {
    ok: true,
    message: {
      companyId: r.companyId,
      messageId: r.id,
      conversationId: r.conversationId,
      occurredAt: r.occurredAt.toISOString(),
      channel: r.channel,
      direction: r.direction,
      author: r.author,
      contactPhone,
      content: { type: r.content.type, text: r.content.text, mediaUrl: r.content.mediaUrl, mediaMime: r.content.mediaMime },
      replyToMessageId: r.replyToMessageId,
      classifications: r.classifications.map((c) => ({ label: c.label, value: c.value ?? null })),
      extractions: r.extractions.map((x) => ({ key: x.key, value: x.value ?? null })),
      toolCalls: r.toolCalls.map((t) => ({ toolName: t.toolName, success: t.success, executionTimeMs: t.executionTimeMs })),
      traceId: r.traceId,
      deleted: r.deleted,
    },
  };
}

/** What an invalid phone is made of, without its value: `12 characters, 7 digits`. */
function phoneShape(text: string): string {
  const chars = [...text].length;
  const digits = text.replace(/\D/g, '').length;
  return `${chars} character${chars === 1 ? '' : 's'}, ${digits} digit${digits === 1 ? '' : 's'}`;
}
