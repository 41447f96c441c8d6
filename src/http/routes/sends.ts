// Single template sends: POST /api/v1/platform-templates/send/ and
// GET /api/v1/platform-templates/messages/{message_id}/ (spec: "Single sent message (status record)").
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { SendRefusedError } from '../../commands/send/handler';
import { sendTemplate } from '../../commands/send/send-template';
import { findSendByProviderMessageId, type SendRecord } from '../../projections/sends/queries';
import type { Services } from '../../services';
import { findContactForRecipient } from '../../projections/sends/contacts';
import { requireCompany } from '../auth';
import { ApiError, fieldErrors, forbidden, notFound } from '../errors';
import { keyInFlightError, keyReusedError, REPLAYED_HEADER } from '../idempotency';
import { COUNTRY_CODE_MESSAGE, hasCountryCode, SEND_PHONE_FORMAT, SEND_PHONE_MESSAGE } from '../../shared/phone';

const REQUIRED = 'This field is required.';
const BLANK = 'This field may not be blank.';

/** A required string field with the spec's field-validation messages. */
const requiredString = () =>
  z
    .string({ error: (issue) => (issue.input === undefined || issue.input === null ? REQUIRED : 'Not a valid string.') })
    .trim()
    .min(1, BLANK);

const objectField = (name: string) =>
  z
    .record(z.string(), z.unknown(), { error: `${name} must be a JSON object.` })
    .nullish()
    .transform((v) => v ?? {});

export const sendBodySchema = z.object({
  phone_number_id: requiredString(),
  template_name: requiredString(),
  language: z
    .string({ error: 'Not a valid string.' })
    .trim()
    .min(1, BLANK)
    .max(20, 'Ensure this field has no more than 20 characters.')
    .nullish()
    .transform((v) => v ?? 'es'),
  recipient_phone: requiredString().pipe(
    // a country code starting with 0 too (regression review 19: refused by the handler only, it was left out of a 400
    // naming another field); the handler's validateSend checks it again for its other callers
    z.string().regex(SEND_PHONE_FORMAT, SEND_PHONE_MESSAGE).refine(hasCountryCode, COUNTRY_CODE_MESSAGE),
  ),
  variables: objectField('variables'),
  button_variables: objectField('button_variables'),
});

const sendResponseSchema = z.object({
  success: z.boolean(),
  message_id: z.string(),
  template_name: z.string(),
  recipient_phone: z.string(),
  status: z.literal('sent'),
  sent_at: z.string(),
});

const iso = z.string().nullable();
const messageResponseSchema = z.object({
  id: z.number().int(),
  template: z.object({ id: z.number().int(), name: z.string(), language: z.string(), category: z.string() }),
  recipient: z.object({ phone: z.string(), contact_name: z.string().nullable(), contact_id: z.number().int().nullable() }),
  variables_used: z.record(z.string(), z.unknown()),
  delivery_status: z.object({
    current: z.string(),
    sent_at: iso,
    delivered_at: iso,
    read_at: iso,
    failed_at: iso,
    error_code: z.string().nullable(),
    error_message: z.string().nullable(),
  }),
  meta_message_id: z.string().nullable(),
  was_successful: z.boolean(),
  error_message: z.string().nullable(),
  sent_at: z.string(),
});

const errorSchema = z.object({ error: z.string() });
/** the field validation shape, {field: [messages]}; other refusals of the send (a template not approved, a body that is not JSON, the Idempotency-Key) are {error} */
const fieldErrorsSchema = z.record(z.string(), z.array(z.string())).describe('{field: [messages]}');
const OUTCOME_UNKNOWN_RETRY_AFTER_S = 5;
const outcomeUnknownSchema = errorSchema.meta({
  description: "a keyed send whose first attempt's outcome is not known yet (SEND_OUTCOME_UNKNOWN): send it again after Retry-After",
  headers: { 'retry-after': { type: 'integer', description: `seconds to wait before sending it again (${OUTCOME_UNKNOWN_RETRY_AFTER_S})` } },
});

const isoOrNull = (d: Date | null): string | null => (d ? d.toISOString() : null);

export function toStatusRecord(send: SendRecord, contact: { id: number; fullName: string | null } | null): z.infer<typeof messageResponseSchema> {
  return {
    id: send.id,
    template: { id: send.templateId, name: send.templateName, language: send.language, category: send.category },
    recipient: { phone: send.recipientPhone, contact_name: contact?.fullName ?? null, contact_id: contact?.id ?? null },
    variables_used: send.variables,
    delivery_status: {
      current: send.status,
      sent_at: isoOrNull(send.sentAt),
      delivered_at: isoOrNull(send.deliveredAt),
      read_at: isoOrNull(send.readAt),
      failed_at: isoOrNull(send.failedAt),
      error_code: send.statusErrorCode,
      error_message: send.statusErrorMessage,
    },
    meta_message_id: send.providerMessageId,
    was_successful: send.wasSuccessful === true,
    error_message: send.errorMessage,
    sent_at: (send.sentAt ?? send.requestedAt).toISOString(),
  };
}

function toApiError(err: SendRefusedError, reply: FastifyReply): ApiError {
  switch (err.code) {
    case 'NUMBER_NOT_FOUND':
    case 'TEMPLATE_NOT_FOUND':
      return notFound(err.message);
    case 'TEMPLATE_NOT_APPROVED':
      return new ApiError(400, err.message);
    case 'INVALID_FIELDS':
      return fieldErrors(err.fields ?? { variables: [err.message] });
    case 'QUOTA_EXCEEDED':
      return new ApiError(429, err.message);
    case 'PROVIDER_REFUSED':
      return new ApiError(422, err.message, 'PROVIDER_REFUSED');
    case 'PROVIDER_UNAVAILABLE':
      return new ApiError(502, err.message, 'PROVIDER_UNAVAILABLE');
    case 'OUTCOME_UNKNOWN':
      // 503, not 409: the Idempotency-Key mechanism keeps every answer under 500, and this one must not be kept
      // (the next retry answers the real outcome); docs/sends.md, "Idempotent sends"
      return new ApiError(503, err.message, 'SEND_OUTCOME_UNKNOWN');
    case 'SEND_INTERRUPTED':
      return new ApiError(422, err.message, 'SEND_INTERRUPTED');
    case 'IDEMPOTENCY_KEY_REUSED':
      return keyReusedError();
    case 'IDEMPOTENCY_KEY_IN_FLIGHT':
      return keyInFlightError(reply, err.retryAfterS ?? 1);
  }
}

export function registerSendRoutes(app: FastifyInstance, services: Services): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post('/api/v1/platform-templates/send/', {
    // the send stream is the key's record (src/commands/send/keyed.ts): the command answers replays, 422 and 409
    config: { errorShape: 'fields', idempotent: 'command' },
    schema: {
      tags: ['platform-templates'],
      operationId: 'sendTemplateMessage', summary: 'Send one approved template message synchronously',
      body: sendBodySchema,
      response: { 200: sendResponseSchema, 400: fieldErrorsSchema.or(errorSchema), 401: errorSchema, 403: errorSchema, 404: errorSchema, 422: errorSchema, 429: errorSchema, 502: errorSchema, 503: outcomeUnknownSchema },
    },
    // the key's policy before the body or path is validated: a global key is 403, never a 400
    onRequest: async (request) => {
      await app.authenticate(request, 'company');
    },
  }, async (request, reply) => {
    const key = requireCompany(request.apiKey!);
    const body = request.body;
    try {
      const sent = await sendTemplate(services, {
        companyId: key.companyId,
        actor: key.keyId,
        correlationId: request.id,
        phoneNumberId: body.phone_number_id,
        templateName: body.template_name,
        language: body.language,
        recipientPhone: body.recipient_phone,
        variables: body.variables,
        buttonVariables: body.button_variables,
        idempotency: request.idempotencyKey === undefined ? undefined : { key: request.idempotencyKey, fingerprint: request.idempotencyFingerprint! },
      });
      if (sent.replayed) reply.header(REPLAYED_HEADER, 'true');
      return {
        success: true,
        message_id: sent.providerMessageId,
        template_name: body.template_name,
        recipient_phone: body.recipient_phone,
        status: 'sent' as const,
        sent_at: sent.sentAt,
      };
    } catch (err) {
      if (err instanceof SendRefusedError) {
        // a keyed send whose first attempt's outcome is not known yet: a provider status usually settles it in seconds
        if (err.code === 'OUTCOME_UNKNOWN') reply.header('retry-after', String(OUTCOME_UNKNOWN_RETRY_AFTER_S));
        if (err.replayed) reply.header(REPLAYED_HEADER, 'true');
        throw toApiError(err, reply);
      }
      throw err;
    }
  });

  r.get('/api/v1/platform-templates/messages/:message_id/', {
    config: { errorShape: 'plain' },
    schema: {
      tags: ['platform-templates'],
      operationId: 'getMessageStatus', summary: 'Status record of a single sent message, by the provider message id',
      params: z.object({ message_id: z.string().min(1).max(512) }),
      response: { 200: messageResponseSchema, 401: errorSchema, 403: errorSchema, 404: errorSchema },
    },
    onRequest: async (request) => {
      await app.authenticate(request, 'company');
    },
  }, async (request) => {
    const key = requireCompany(request.apiKey!);
    // a NUL byte cannot be stored in Postgres text (the query would fail with 500): no such message exists
    const send = request.params.message_id.includes('\u0000') ? undefined : await findSendByProviderMessageId(services.pool, request.params.message_id);
    if (!send) throw notFound('Message not found.');
    if (send.companyId !== key.companyId) throw forbidden('You do not have access to this message.');
    const contact = await findContactForRecipient(services.pool, send.companyId, send.recipientE164);
    return toStatusRecord(send, contact);
  });
}
