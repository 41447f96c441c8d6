// Bulk template sends (docs/bulk.md):
//   POST /api/v1/platform-templates/send-bulk/                         create (202)
//   GET  /api/v1/platform-templates/bulk-sends/                        list, filtered and paged
//   GET  /api/v1/platform-templates/bulk-sends/{bulk_send_id}/          detail
//   GET  /api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/ per-recipient messages, paged
//   POST /api/v1/platform-templates/bulk-sends/{bulk_send_id}/cancel/   manual cancel
// Field validation answers 400 {field: [messages]}; an unknown (or another company's) bulk send 404 {detail};
// other errors {error}.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { cancelBulkSend } from '../../commands/bulk/cancel';
import { BulkRefusedError, createBulkSend, estimateMinutes } from '../../commands/bulk/create';
import { BULK_STATUSES } from '../../commands/bulk/decider';
import type { MessagingTier } from '../../projections/accounts/queries';
import { recommendedSpacingMs } from '../../projections/accounts/queries';
import {
  type BulkMessageRow,
  type BulkMessageStatus,
  type BulkSendRow,
  type BulkStatus,
  getBulkSend,
  listBulkMessages,
  listBulkSends,
} from '../../projections/bulk/queries';
import type { Services } from '../../services';
import { isStorableInstant } from '../../shared/storable';
import { requireCompany } from '../auth';
import { ApiError, detailNotFound, fieldErrors, notFound } from '../errors';
import { pageLinks } from '../page-links';

/** send-bulk accepts bodies up to 32 MiB: 100,000 recipients with a few variables each. */
export const BULK_BODY_LIMIT = 32 * 1024 * 1024;
export const DEFAULT_PAGE_SIZE = 20;
/** larger `page_size` values are clamped to this */
export const MAX_PAGE_SIZE = 100;

const REQUIRED = 'This field is required.';
const BLANK = 'This field may not be blank.';
const MESSAGE_STATUSES = ['sent', 'delivered', 'read', 'failed'] as const;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
/** the largest internal id (bulk_sends.template_id is a Postgres integer) */
const MAX_ID = 2_147_483_647;

const requiredString = () =>
  z
    .string({ error: (issue) => (issue.input === undefined || issue.input === null ? REQUIRED : 'Not a valid string.') })
    .trim()
    .min(1, BLANK);

const recipientDoc = 'Each recipient: {"phone": "+5491155551234", "variables": {...}, "button_variables": {"button_0": "..."}} ' +
  '(phone: international format, a leading + and digits only; variables and button_variables optional, as for the single send).';

/**
 * A recipient as the OpenAPI document types it (generated clients type their recipients by it: review 16e); each one
 * is checked by the handler (src/commands/bulk/input.ts), which names a bad one by its index.
 */
const recipientItemDoc = {
  type: 'object',
  required: ['phone'],
  properties: {
    phone: { type: 'string' },
    variables: { type: 'object', nullable: true, additionalProperties: true },
    button_variables: { type: 'object', nullable: true, additionalProperties: true },
  },
};

const createBodySchema = z.object({
  phone_number_id: requiredString().describe("the provider's phone number id of the sending number"),
  template_name: requiredString().describe('an APPROVED template of that number'),
  language: z
    .string({ error: 'Not a valid string.' })
    .trim()
    .min(1, BLANK)
    .max(20, 'Ensure this field has no more than 20 characters.')
    .nullish()
    .transform((v) => v ?? 'es')
    .describe('default es'),
  recipients: z
    .array(z.unknown().meta(recipientItemDoc), { error: (issue) => (issue.input === undefined || issue.input === null ? REQUIRED : 'Expected a list of recipients.') })
    .min(1, 'This list may not be empty.')
    .describe(recipientDoc),
});

const createdSchema = z.object({
  bulk_send_id: z.string(),
  task_id: z.string(),
  status: z.literal('queued'),
  template_name: z.string(),
  total_recipients: z.number().int(),
  unique_recipients: z.number().int(),
  estimated_time_minutes: z.number(),
  created_at: z.string(),
  whatsapp_phone_number: z.object({
    id: z.number().int(),
    phone_number_id: z.string(),
    display_phone_number: z.string(),
    verified_name: z.string(),
    quality_rating: z.string(),
    messaging_limit_tier: z.string(),
  }),
  quota_info: z.object({
    can_send: z.boolean(),
    quota_needed: z.number().int(),
    quota_available: z.number().int(),
    quota_total: z.number().int(),
    tier: z.string(),
  }),
});

const iso = z.string().nullable();
const listItemShape = {
  id: z.string(),
  status: z.enum(BULK_STATUSES as [BulkStatus, ...BulkStatus[]]),
  template: z.object({ id: z.number().int(), template_name: z.string(), language: z.string(), status: z.string() }),
  phone_number: z.object({ id: z.number().int(), display_phone_number: z.string(), verified_name: z.string() }),
  total_recipients: z.number().int(),
  sent_count: z.number().int(),
  delivered_count: z.number().int(),
  read_count: z.number().int(),
  failed_count: z.number().int(),
  pending_count: z.number().int(),
  progress_percentage: z.number(),
};
const listItemSchema = z.object({ ...listItemShape, created_at: z.string(), completed_at: iso });
const detailSchema = z.object({
  ...listItemShape,
  estimated_time_minutes: z.number(),
  started_at: iso,
  completed_at: iso,
  created_at: z.string(),
  created_by: z.object({ id: z.number().int(), email: z.string(), first_name: z.string(), last_name: z.string() }).nullable(),
});
const messageItemSchema = z.object({
  id: z.number().int(),
  recipient_phone: z.string(),
  status: z.enum(MESSAGE_STATUSES),
  meta_message_id: z.string().nullable(),
  variables_used: z.record(z.string(), z.unknown()),
  sent_at: z.string(),
  delivered_at: iso,
  read_at: iso,
  error_message: z.string().nullable(),
});
const page = <T extends z.ZodTypeAny>(item: T) =>
  z.object({ count: z.number().int(), next: z.string().nullable(), previous: z.string().nullable(), results: z.array(item) });

const errorSchema = z.object({ error: z.string() });
const detailErrorSchema = z.object({ detail: z.string() });
/** the key's refusals (missing, invalid or expired: 401; a global key: 403), in the plain shape whatever the route's */
const keyRefusals = { 401: errorSchema, 403: errorSchema };
const fieldErrorsSchema = z.record(z.string(), z.array(z.string())).describe('{field: [messages]}');

// ---- query and path parameters (strings in, checked here so the messages are the API's own)

const optionalText = () => z.string({ error: 'Not a valid string.' }).optional();

function intParam(min: number, fallback: number) {
  return optionalText().transform((v, ctx) => {
    if (v === undefined || v.trim() === '') return fallback;
    if (!/^\d+$/.test(v.trim())) {
      ctx.addIssue({ code: 'custom', message: 'A valid integer is required.' });
      return z.NEVER;
    }
    const n = Number(v);
    if (n < min) {
      ctx.addIssue({ code: 'custom', message: `Ensure this value is greater than or equal to ${min}.` });
      return z.NEVER;
    }
    return n;
  });
}

/** An internal id filter: digits only, at most MAX_ID (a larger one would fail the query: it can match nothing). */
const idParam = () =>
  optionalText().transform((v, ctx) => {
    if (v === undefined || v === '') return undefined;
    if (!/^\d+$/.test(v)) {
      ctx.addIssue({ code: 'custom', message: 'A valid integer is required.' });
      return z.NEVER;
    }
    const n = Number(v);
    if (n > MAX_ID) {
      ctx.addIssue({ code: 'custom', message: `Ensure this value is less than or equal to ${MAX_ID}.` });
      return z.NEVER;
    }
    return n;
  });

const choice = <T extends string>(values: readonly T[]) =>
  optionalText().transform((v, ctx) => {
    if (v === undefined || v === '') return undefined;
    if (!(values as readonly string[]).includes(v)) {
      ctx.addIssue({ code: 'custom', message: `Select a valid choice. ${v} is not one of the available choices.` });
      return z.NEVER;
    }
    return v as T;
  });

const dateParam = () =>
  optionalText().transform((v, ctx) => {
    if (v === undefined || v === '') return undefined;
    const midnight = new Date(`${v}T00:00:00Z`);
    const ok = DATE.test(v) && !Number.isNaN(midnight.getTime()) && midnight.toISOString().startsWith(v);
    if (!ok) {
      ctx.addIssue({ code: 'custom', message: 'Enter a valid date in YYYY-MM-DD format.' });
      return z.NEVER;
    }
    if (!isStorableInstant(midnight)) {
      ctx.addIssue({ code: 'custom', message: 'Enter a date from 0001-01-01 to 9999-12-31.' });
      return z.NEVER;
    }
    return v;
  });

const pagingShape = {
  // documented as integers (as the deliveries page's are), read from the query's text here: generated clients send numbers
  page: intParam(1, 1).meta({ type: 'integer', minimum: 1, description: 'default 1' }),
  page_size: intParam(1, DEFAULT_PAGE_SIZE).meta({
    type: 'integer', minimum: 1, description: `default ${DEFAULT_PAGE_SIZE}, at most ${MAX_PAGE_SIZE} (larger values are clamped)`,
  }),
};
const listQuerySchema = z.object({
  status: choice(BULK_STATUSES).meta({ enum: [...BULK_STATUSES], description: BULK_STATUSES.join(', ') }),
  template: idParam().meta({ type: 'integer', minimum: 0, maximum: MAX_ID, description: `internal template id (0 to ${MAX_ID})` }),
  created_after: dateParam().describe('YYYY-MM-DD, inclusive (UTC), 0001-01-01 to 9999-12-31'),
  created_before: dateParam().describe('YYYY-MM-DD, inclusive (UTC), 0001-01-01 to 9999-12-31'),
  ...pagingShape,
});
const messagesQuerySchema = z.object({ status: choice(MESSAGE_STATUSES).meta({ enum: [...MESSAGE_STATUSES], description: MESSAGE_STATUSES.join(', ') }), ...pagingShape });
const idParams = z.object({
  bulk_send_id: z.string().regex(UUID, 'Must be a valid UUID.').transform((v) => v.toLowerCase()),
});

// ---- views

/** The processed share in percent, truncated to 2 decimals: 100 only once no recipient is pending (2026-11-27). */
function progressPercentage(total: number, pending: number): number {
  if (total <= 0) return 100;
  return Math.floor(((total - pending) * 10_000) / total) / 100;
}
const isoOrNull = (d: Date | null): string | null => (d ? d.toISOString() : null);

function listItem(b: BulkSendRow) {
  return {
    id: b.bulkId,
    status: b.status,
    template: { id: b.templateId, template_name: b.templateName, language: b.language, status: b.templateStatus },
    phone_number: { id: b.numberId, display_phone_number: b.displayPhoneNumber, verified_name: b.verifiedName },
    total_recipients: b.totalRecipients,
    sent_count: b.sentCount,
    delivered_count: b.deliveredCount,
    read_count: b.readCount,
    failed_count: b.failedCount,
    pending_count: b.pendingCount,
    progress_percentage: progressPercentage(b.totalRecipients, b.pendingCount),
  };
}

export function bulkListItem(b: BulkSendRow) {
  return { ...listItem(b), created_at: b.createdAt.toISOString(), completed_at: isoOrNull(b.completedAt) };
}

export function bulkDetail(b: BulkSendRow) {
  const active = b.status === 'QUEUED' || b.status === 'PROCESSING';
  return {
    ...listItem(b),
    estimated_time_minutes: active ? estimateMinutes(b.pendingCount, recommendedSpacingMs(b.tier as MessagingTier) ?? 0) : 0,
    started_at: isoOrNull(b.startedAt),
    completed_at: isoOrNull(b.completedAt),
    created_at: b.createdAt.toISOString(),
    created_by: b.createdBy
      ? { id: b.createdBy.id, email: b.createdBy.email, first_name: b.createdBy.firstName, last_name: b.createdBy.lastName }
      : null,
  };
}

function messageItem(m: BulkMessageRow) {
  return {
    id: m.id,
    recipient_phone: m.recipientPhone,
    status: m.status as BulkMessageStatus,
    meta_message_id: m.providerMessageId,
    variables_used: m.variables,
    sent_at: (m.processedAt ?? new Date(0)).toISOString(),
    delivered_at: isoOrNull(m.deliveredAt),
    read_at: isoOrNull(m.readAt),
    error_message: m.errorMessage,
  };
}


/** The rows of a page; a page whose first row lies beyond any table's size (its offset would overflow the query's
 * bigint) is past the last page without asking. */
function pageWindow(pageNumber: number, requestedSize: number) {
  const limit = Math.min(requestedSize, MAX_PAGE_SIZE);
  const offset = (pageNumber - 1) * limit;
  if (!Number.isSafeInteger(offset)) throw detailNotFound('Invalid page.');
  return { limit, offset };
}

function checkPage(pageNumber: number, limit: number, count: number): void {
  if (pageNumber > 1 && (pageNumber - 1) * limit >= count) throw detailNotFound('Invalid page.');
}

function toApiError(err: BulkRefusedError): ApiError {
  switch (err.code) {
    case 'INVALID_FIELDS':
      return fieldErrors(err.fields ?? { recipients: [err.message] });
    case 'NUMBER_NOT_FOUND':
    case 'TEMPLATE_NOT_FOUND':
      return notFound(err.message);
    case 'TEMPLATE_NOT_APPROVED':
      return new ApiError(400, err.message);
    case 'BULK_NOT_FOUND':
      return detailNotFound(err.message);
    case 'BULK_FINISHED':
      return new ApiError(409, err.message);
  }
}

const rethrow = (err: unknown): never => {
  if (err instanceof BulkRefusedError) throw toApiError(err);
  throw err;
};

export function registerBulkRoutes(app: FastifyInstance, services: Services): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  // the key's policy on onRequest, before the body, query and path are validated: a global key is 403, never a 400
  const auth = async (request: FastifyRequest) => {
    await app.authenticate(request, 'company');
  };

  r.post('/api/v1/platform-templates/send-bulk/', {
    bodyLimit: BULK_BODY_LIMIT,
    config: { errorShape: 'fields', idempotent: true },
    schema: {
      tags: ['platform-templates'],
      operationId: 'createBulkSend', summary: 'Create an asynchronous bulk send of an approved template',
      description:
        'Validates every recipient (phone format; variables against the template) before anything is created: one invalid ' +
        'recipient rejects the request with 400 naming it, e.g. {"recipients": ["recipients[3].phone: Enter the phone number ' +
        'in international format: a leading + and digits only, no spaces."]} (the first 20 invalid recipients are described). ' +
        'Repeated phones are removed, every spelling of one number counted once (total_recipients submitted, ' +
        'unique_recipients kept). At most 100,000 recipients (more is a 400) and bodies up to 32 MiB. The dispatcher sends at the number\'s tier spacing and pauses while its 24 h quota is used up.',
      body: createBodySchema,
      response: { 202: createdSchema, 400: fieldErrorsSchema.or(errorSchema), ...keyRefusals, 404: errorSchema },
    },
    onRequest: auth,
  }, async (request, reply) => {
    const key = requireCompany(request.apiKey!);
    const body = request.body;
    const created = await createBulkSend(services, {
      companyId: key.companyId,
      actor: key.keyId,
      userId: key.userId,
      phoneNumberId: body.phone_number_id,
      templateName: body.template_name,
      language: body.language,
      recipients: body.recipients,
      idempotencyKey: request.idempotencyKey,
    }).catch(rethrow);
    reply.code(202);
    return {
      bulk_send_id: created.bulkId,
      task_id: created.taskId,
      status: 'queued' as const,
      template_name: created.templateName,
      total_recipients: created.totalRecipients,
      unique_recipients: created.uniqueRecipients,
      estimated_time_minutes: created.estimatedTimeMinutes,
      created_at: created.createdAt,
      whatsapp_phone_number: {
        id: created.number.id,
        phone_number_id: created.number.phoneNumberId,
        display_phone_number: created.number.displayPhoneNumber,
        verified_name: created.number.verifiedName,
        quality_rating: created.number.qualityRating,
        messaging_limit_tier: created.number.messagingLimitTier,
      },
      quota_info: {
        can_send: created.quota.canSend,
        quota_needed: created.quota.needed,
        quota_available: created.quota.available,
        quota_total: created.quota.total,
        tier: created.quota.tier,
      },
    };
  });

  r.get('/api/v1/platform-templates/bulk-sends/', {
    config: { errorShape: 'fields' },
    schema: {
      tags: ['platform-templates'],
      operationId: 'listBulkSends', summary: "The company's bulk sends, newest first, paged",
      description: `Filters: status, template (internal template id), created_after and created_before (YYYY-MM-DD, inclusive, UTC). ` +
        `page (default 1; past the last page: 404 {"detail": "Invalid page."}), page_size (default ${DEFAULT_PAGE_SIZE}, ` +
        `at most ${MAX_PAGE_SIZE}: larger values are clamped). next/previous are absolute URLs keeping the filters.`,
      querystring: listQuerySchema,
      response: { 200: page(listItemSchema), 400: fieldErrorsSchema.or(errorSchema), ...keyRefusals, 404: detailErrorSchema },
    },
    onRequest: auth,
  }, async (request) => {
    const key = requireCompany(request.apiKey!);
    const q = request.query;
    const window = pageWindow(q.page, q.page_size);
    const { count, rows } = await listBulkSends(
      services.pool,
      key.companyId,
      { status: q.status, templateId: q.template, createdAfter: q.created_after, createdBefore: q.created_before },
      window,
    );
    checkPage(q.page, window.limit, count);
    return { count, ...pageLinks(request, q.page, window.limit, count), results: rows.map(bulkListItem) };
  });

  r.get('/api/v1/platform-templates/bulk-sends/:bulk_send_id/', {
    config: { errorShape: 'fields' },
    schema: {
      tags: ['platform-templates'],
      operationId: 'getBulkSend', summary: 'A bulk send: status, counters, progress, remaining time estimate, creator',
      params: idParams,
      response: { 200: detailSchema, 400: fieldErrorsSchema.or(errorSchema), ...keyRefusals, 404: detailErrorSchema },
    },
    onRequest: auth,
  }, async (request) => {
    const key = requireCompany(request.apiKey!);
    const bulk = await getBulkSend(services.pool, key.companyId, request.params.bulk_send_id);
    if (!bulk) throw detailNotFound('Bulk send not found.');
    return bulkDetail(bulk);
  });

  r.get('/api/v1/platform-templates/bulk-sends/:bulk_send_id/messages/', {
    config: { errorShape: 'fields' },
    schema: {
      tags: ['platform-templates'],
      operationId: 'listBulkSendMessages', summary: "A bulk send's messages (recipients already sent to or failed), in submission order, paged",
      description: `status filter: ${MESSAGE_STATUSES.join(', ')}. Paging as for the list.`,
      params: idParams,
      querystring: messagesQuerySchema,
      response: { 200: page(messageItemSchema), 400: fieldErrorsSchema.or(errorSchema), ...keyRefusals, 404: detailErrorSchema },
    },
    onRequest: auth,
  }, async (request) => {
    const key = requireCompany(request.apiKey!);
    const bulk = await getBulkSend(services.pool, key.companyId, request.params.bulk_send_id);
    if (!bulk) throw detailNotFound('Bulk send not found.');
    const q = request.query;
    const window = pageWindow(q.page, q.page_size);
    const { count, rows } = await listBulkMessages(services.pool, bulk.bulkId, q.status, window);
    checkPage(q.page, window.limit, count);
    return { count, ...pageLinks(request, q.page, window.limit, count), results: rows.map(messageItem) };
  });

  r.post('/api/v1/platform-templates/bulk-sends/:bulk_send_id/cancel/', {
    config: { errorShape: 'fields', idempotent: true },
    schema: {
      tags: ['platform-templates'],
      operationId: 'cancelBulkSend', summary: 'Cancel a bulk send',
      description:
        'Stops further sends at once; messages already sent stay sent and keep receiving delivery statuses, recipients in flight ' +
        'get their outcome, the rest are never sent (they stay counted in pending_count). Answers 200 with the bulk send ' +
        '(status CANCELLED). 409 {"error"} when it already finished or was cancelled; 404 {"detail"} when unknown. No body.',
      params: idParams,
      // a malformed JSON body or Idempotency-Key is a plain {error} 400
      response: { 200: detailSchema, 400: fieldErrorsSchema.or(errorSchema), ...keyRefusals, 404: detailErrorSchema, 409: errorSchema },
    },
    onRequest: auth,
  }, async (request) => {
    const key = requireCompany(request.apiKey!);
    const bulkId = request.params.bulk_send_id;
    await cancelBulkSend(services, { companyId: key.companyId, bulkId, actor: key.keyId }).catch(rethrow);
    const bulk = await getBulkSend(services.pool, key.companyId, bulkId);
    if (!bulk) throw detailNotFound('Bulk send not found.');
    return bulkDetail(bulk);
  });
}
