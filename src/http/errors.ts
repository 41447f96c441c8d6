import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { DomainError } from '../commands/decider';
import { ReadModelsBehindError } from '../commands/provisioning/read-models';
import { ReadModelTimeoutError } from '../ports/read-models';

/**
 * The spec's error body shapes. A route family picks its shape with `config: { errorShape }`; every error,
 * whoever raised it (zod, fastify, auth, a handler), is mapped here and nowhere else.
 *  - plain:  { error: "<message>" }                          (most endpoints)
 *  - export: { error: { code, message } }                    (qualitative export)
 *  - fields: { <field>: ["<message>", ...] }                 (field validation of send and send-bulk)
 *  - detail: { detail: "<message>" }                         (bulk-sends detail and messages)
 */
export type ErrorShape = 'plain' | 'export' | 'fields' | 'detail';

declare module 'fastify' {
  interface FastifyContextConfig {
    errorShape?: ErrorShape;
  }
}

export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    /** machine code for the export shape (INVALID_PARAMETER, AUTH_REQUIRED, COMPANY_ACCESS_DENIED, ...) */
    readonly code: string = defaultCode(statusCode),
    /** per-field messages for the `fields` shape */
    readonly fields?: Record<string, string[]>,
    /** force a shape regardless of the route's (e.g. `detail` for an unknown bulk send) */
    readonly shape?: ErrorShape,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

function defaultCode(status: number): string {
  switch (status) {
    case 400: return 'INVALID_PARAMETER';
    case 401: return 'AUTH_REQUIRED';
    case 403: return 'FORBIDDEN';
    case 404: return 'NOT_FOUND';
    case 409: return 'CONFLICT';
    case 413: return 'PAYLOAD_TOO_LARGE';
    case 415: return 'UNSUPPORTED_MEDIA_TYPE';
    case 429: return 'RATE_LIMITED';
    default: return status >= 500 ? 'INTERNAL_ERROR' : 'BAD_REQUEST';
  }
}

export const badRequest = (message: string, code?: string) => new ApiError(400, message, code);
export const unauthorized = (message: string) => new ApiError(401, message, 'AUTH_REQUIRED');
export const forbidden = (message: string, code?: string) => new ApiError(403, message, code);
export const notFound = (message: string) => new ApiError(404, message);
export const conflict = (message: string) => new ApiError(409, message);
export const fieldErrors = (fields: Record<string, string[]>) =>
  new ApiError(400, Object.entries(fields).map(([f, m]) => `${f}: ${m.join(' ')}`).join('; '), 'INVALID_PARAMETER', fields);
export const detailNotFound = (message: string) => new ApiError(404, message, 'NOT_FOUND', undefined, 'detail');

export function errorBody(shape: ErrorShape, err: ApiError): unknown {
  switch (shape) {
    case 'export':
      return { error: { code: err.code, message: err.message } };
    case 'fields':
      return err.fields ?? { error: err.message };
    case 'detail':
      return { detail: err.message };
    case 'plain':
      return { error: err.message };
  }
}

interface ZodIssueLike {
  path?: (string | number)[];
  instancePath?: string;
  message?: string;
  params?: { issue?: { path?: (string | number)[]; message?: string } };
}

/** Turns a request-schema validation failure into an ApiError naming each offending field. */
function fromValidation(err: FastifyError & { validation?: ZodIssueLike[]; validationContext?: string }): ApiError {
  const fields: Record<string, string[]> = {};
  for (const issue of err.validation ?? []) {
    const path = issue.params?.issue?.path ?? issue.path ?? (issue.instancePath ?? '').split('/').filter(Boolean);
    const field = path.length ? path.join('.') : (err.validationContext ?? 'body');
    const message = issue.params?.issue?.message ?? issue.message ?? 'is invalid';
    (fields[field] ??= []).push(message);
  }
  if (Object.keys(fields).length === 0) fields[err.validationContext ?? 'body'] = [err.message];
  return fieldErrors(fields);
}

/** Seconds a client whose write its read models did not show in time is told to wait before reading it back. */
export const READ_MODELS_RETRY_AFTER_S = 5;

/**
 * A read-your-writes wait that ran out (a rebuild or a failing projection holds the read model): the write is
 * kept and shows once the read model moves, so a temporary 503, not an internal error.
 */
const readModelsBehind = (err: unknown): ApiError | undefined =>
  err instanceof ReadModelTimeoutError || err instanceof ReadModelsBehindError
    ? new ApiError(503, 'the request was recorded, but reads do not show it yet: read it again after Retry-After rather than repeating the request', 'READ_MODELS_BEHIND')
    : undefined;

export function toApiError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  const behind = readModelsBehind(err);
  if (behind) return behind;
  if (err instanceof DomainError) return new ApiError(400, err.message, err.code);
  const fe = err as FastifyError & { validation?: unknown[] };
  if (hasZodFastifySchemaValidationErrors(fe) || Array.isArray(fe?.validation)) return fromValidation(fe as never);
  if (typeof fe?.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new ApiError(fe.statusCode, clientMessage(fe));
  }
  return undefined;
}

function clientMessage(fe: FastifyError): string {
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE': return 'request body is too large';
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE': return 'unsupported content type: send application/json';
    case 'FST_ERR_CTP_EMPTY_JSON_BODY': return 'request body is empty';
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_BAD_REQUEST': return 'request body is not valid JSON';
    default: return fe.message;
  }
}

/** The one root error handler: spec body shapes for 4xx; 5xx details are logged, never sent. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const shape = request.routeOptions?.config?.errorShape ?? 'plain';
    const apiError = toApiError(err);
    if (apiError) {
      if (apiError.code === 'READ_MODELS_BEHIND') {
        request.log.warn({ err }, 'read models behind: answered 503');
        reply.header('retry-after', String(READ_MODELS_RETRY_AFTER_S));
      }
      const s = apiError.shape ?? (apiError.fields ? shape : shape === 'fields' ? 'plain' : shape);
      return reply.status(apiError.statusCode).send(errorBody(s, apiError));
    }
    request.log.error({ err }, 'unhandled error');
    const internal = new ApiError(500, 'internal server error');
    return reply.status(500).send(errorBody(shape === 'fields' ? 'plain' : shape, internal));
  });
  app.setNotFoundHandler((request, reply) => {
    reply.status(404).send({ error: `no route for ${request.method} ${request.url.split('?')[0]}` });
  });
}

/**
 * For a route (with `attachValidation: true`) whose OpenAPI document marks a query parameter required while its
 * handler answers a missing one with the route's own message: the validation error is thrown unless its only
 * problem is a missing parameter of `query` (the handler then names it). Any other invalid value is the 400 it was,
 * naming only that value.
 */
export function throwUnlessOnlyMissing(request: FastifyRequest, query: z.ZodObject): void {
  if (!request.validationError) return;
  const others = query.partial().safeParse(request.query);
  if (others.success) return;
  const fields: Record<string, string[]> = {};
  for (const issue of others.error.issues) (fields[issue.path.join('.') || 'querystring'] ??= []).push(issue.message);
  throw fieldErrors(fields);
}
