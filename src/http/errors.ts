import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { DomainError } from '../commands/decider';
import { ReadModelsBehindError } from '../commands/provisioning/read-models';
import { ReadModelTimeoutError } from '../ports/read-models';
import { LogThrottle } from '../shared/log-throttle';
import { isDatabaseUnavailable } from '../shared/retry';
import { DATABASE_UNAVAILABLE_RETRY_AFTER_S } from '../shared/retry-after';
import { collectRouteMethods, methodsOf } from './route-methods';

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
  interface FastifyRequest {
    /** the route's handler was called: a command may have written (or called the provider) from then on */
    routeHandlerStarted: boolean;
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

/** The shape of an error that names no fields: a `fields` route's other errors are plain. */
const withoutFields = (shape: ErrorShape | undefined): Exclude<ErrorShape, 'fields'> =>
  shape === undefined || shape === 'fields' ? 'plain' : shape;

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

/** At most one log line per this many ms for each kind of database failure answered 503. */
export const DATABASE_UNAVAILABLE_LOG_EVERY_MS = 10_000;

export const DATABASE_UNAVAILABLE_MESSAGE = 'the service cannot reach its database at the moment: nothing was done; send the request again after Retry-After';

/**
 * The 500 of a command whose database connection failed once its handler ran: it may have written (an append
 * committed whose answer was lost, the provider called before the first append of an unkeyed send, an append made
 * before a read-your-writes read failed), so its outcome is unknown. What makes the retry safe: the Idempotency-Key of
 * the routes that take one.
 */
export function outcomeUnknownMessage(request: FastifyRequest): string {
  const lost = 'the database became unavailable while the request ran, after it may have made changes: its outcome is unknown.';
  if (!request.routeOptions?.config?.idempotent) return `${lost} Check its outcome before sending it again.`;
  return request.headers['idempotency-key'] !== undefined
    ? `${lost} Send it again with the same Idempotency-Key: it takes effect at most once.`
    : `${lost} Check its outcome before sending it again: a request sent with an Idempotency-Key can be sent again safely with the same key.`;
}

/**
 * A request the database failed (src/shared/retry.ts, isDatabaseUnavailable): 503 DATABASE_UNAVAILABLE when nothing
 * of it can have taken effect, which is a read (GET/HEAD) whenever it failed, and any request that failed before its
 * handler ran (authentication and the Idempotency-Key's claim only read, or claim the key, which a 503 gives back);
 * else (a command's handler ran) 500 with the outcome unknown. Whether the connection was refused or lost does not
 * decide it: once a command's handler ran, a refused connection may follow its write (the unkeyed send calls the
 * provider before its first statement; a read-your-writes wait reads after the append), and a pool's connect
 * timeout is also what a busy pool answers.
 */
function databaseFailure(err: unknown, request: FastifyRequest): ApiError | undefined {
  if (!isDatabaseUnavailable(err)) return undefined;
  const read = request.method === 'GET' || request.method === 'HEAD';
  if (read || !request.routeHandlerStarted) return new ApiError(503, DATABASE_UNAVAILABLE_MESSAGE, 'DATABASE_UNAVAILABLE');
  return new ApiError(500, outcomeUnknownMessage(request));
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** The one root error handler: spec body shapes for 4xx; 5xx details are logged, never sent. */
export function registerErrorHandling(app: FastifyInstance): void {
  const unavailableLogged = new LogThrottle(DATABASE_UNAVAILABLE_LOG_EVERY_MS);
  // marks a request whose handler was called (databaseFailure): every route's, whichever hooks run before it
  app.decorateRequest('routeHandlerStarted', false);
  app.addHook('onRoute', (route) => {
    // a read answers 503 wherever it failed: only the other methods' handlers are marked (the mark cost reads about
    // a tenth of their throughput in bench/reads.ts: a property written on every request)
    if (methodsOf(route).every((m) => m === 'GET' || m === 'HEAD')) return;
    const handler = route.handler as (this: unknown, request: FastifyRequest, reply: FastifyReply) => unknown;
    route.handler = function (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      request.routeHandlerStarted = true;
      return handler.call(this, request, reply);
    } as typeof route.handler;
  });
  app.setErrorHandler((err: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const shape = request.routeOptions?.config?.errorShape ?? 'plain';
    const apiError = toApiError(err);
    if (apiError) {
      if (apiError.code === 'READ_MODELS_BEHIND') {
        request.log.warn({ err }, 'read models behind: answered 503');
        reply.header('retry-after', String(READ_MODELS_RETRY_AFTER_S));
      }
      const s = apiError.shape ?? (apiError.fields ? shape : withoutFields(shape));
      // written as built, not through the route's response schema: a refusal in a shape the route does not declare
      // (the Host guard's {error} on the bulk lists, which declared only {field: [...]} for 400) failed that
      // serialization and became fastify's own 500 {"error":"Internal Server Error"} (review 22)
      return reply.status(apiError.statusCode).type(JSON_TYPE).serializer(JSON.stringify).send(errorBody(s, apiError));
    }
    const plainOr = withoutFields(shape);
    const database = databaseFailure(err, request);
    if (database?.statusCode === 503) {
      // an outage fails every request: one line per kind of failure and interval, with the count of the others
      const { code, message } = err as { code?: unknown; message?: unknown };
      const due = unavailableLogged.due(String(code ?? message)); // pg's messages without a code are fixed texts
      if (due) request.log.warn({ err, notLoggedSinceLast: due.notLoggedSinceLast }, 'database unavailable: answered 503');
      reply.header('retry-after', String(DATABASE_UNAVAILABLE_RETRY_AFTER_S));
      return reply.status(503).send(errorBody(plainOr, database));
    }
    if (database) {
      // each one: an operator may have to find out what this request did
      request.log.warn({ err }, 'database unavailable under a command: answered 500, outcome unknown');
      return reply.status(500).send(errorBody(plainOr, database));
    }
    request.log.error({ err }, 'unhandled error');
    const internal = new ApiError(500, 'internal server error');
    return reply.status(500).send(errorBody(plainOr, internal));
  });
  const routes = collectRouteMethods(app);
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    const allowed = routes.allowedFor(path);
    // a route that takes this method and found nothing (a static file that does not exist) is a 404 too (review 17)
    const takesIt = allowed?.methods.includes(request.method);
    if (allowed === undefined || takesIt) return reply.status(404).send({ error: `no route for ${request.method} ${path}` });
    // a path that exists, asked with another method: 405 with the methods it takes, in the route's error shape
    const shape = withoutFields(allowed.errorShape);
    reply.header('allow', allowed.methods.join(', '));
    return reply.status(405).send(errorBody(shape, new ApiError(405, `${request.method} is not allowed on ${path}: it takes ${allowed.methods.join(', ')}`, 'METHOD_NOT_ALLOWED')));
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
