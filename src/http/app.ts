import { isUtf8 } from 'node:buffer';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance, type FastifyReply, LogController } from 'fastify';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { Services } from '../services';
import { apiKeysProjection } from '../projections/apikeys/projection';
import { registerAuth } from './auth';
import { ApiError, fieldErrors, registerErrorHandling } from './errors';
import { registerIdempotency, REPLAYED_HEADER } from './idempotency';
import { answerClientError, answerConnect, answerUnsupportedExpectation, originFormOf, refuseEncodedBodies, requireHostHeader } from './protocol-guards';
import { registerRateLimits } from './rate-limit';
import { registerRoutes } from './routes';
import { registerSharedRefusalDocs } from './shared-refusal-docs';
import { decorateReadiness } from './stop-readiness';
import { hasUnstorableText, MAX_JSON_DEPTH, nestsDeeperThan, scanInTurns } from '../shared/storable';
import { isLargeBody, Turns } from '../shared/turns';

const UNSTORABLE_MESSAGE = 'text must not contain NUL (\\u0000) characters or unpaired surrogates';
const NOT_UTF8_MESSAGE = 'request body is not valid UTF-8';
const TOO_DEEP_MESSAGE = `nested too deeply (at most ${MAX_JSON_DEPTH} levels of objects and lists)`;

export const DEFAULT_BODY_LIMIT = 1024 * 1024; // 1 MiB; send-bulk raises its own limit
/** headers within it, and a connection silent for it is closed */
export const REQUEST_TIMEOUT_MS = 30_000;
/**
 * The whole request, body included: a send-bulk body at its 32 MiB limit arrives in it at 0.28 MB/s (a 2.2 Mbit/s
 * uplink); at 30 s it would need 1.1 MB/s.
 */
export const WHOLE_REQUEST_TIMEOUT_MS = 120_000;
/**
 * How often Node looks for requests past their timeouts. Its default (30 s) made a 30-s timeout 30 to 60 s; and the
 * timeouts are given to Node's constructor (below), not set afterwards as fastify sets them: set afterwards, the
 * headers timeout kept Node's 60 s (review 22, over a real socket).
 */
export const REQUEST_TIMEOUT_CHECK_MS = 5_000;

export interface AppOptions {
  /** pino logger options, or false (tests) */
  logger?: boolean | object;
  /** the time a request has to arrive whole (default WHOLE_REQUEST_TIMEOUT_MS; tests use a shorter one) */
  requestTimeoutMs?: number;
}

/** The fastify app factory: tests build it and `inject` into it; `serve` listens. */
export async function buildApp(services: Services, options: AppOptions = {}): Promise<FastifyInstance> {
  const requestTimeout = options.requestTimeoutMs ?? WHOLE_REQUEST_TIMEOUT_MS;
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: DEFAULT_BODY_LIMIT,
    requestTimeout,
    connectionTimeout: REQUEST_TIMEOUT_MS,
    keepAliveTimeout: 10_000,
    // refuseWhileClosing answers instead, in the route's error shape (fastify's own 503 has a body of its own)
    return503OnClosing: false,
    clientErrorHandler: answerClientError,
    // a request without Host is refused by requireHostHeader (below), in the spec's shape
    // and the request timeouts, given to Node's constructor (REQUEST_TIMEOUT_CHECK_MS)
    http: {
      requireHostHeader: false,
      requestTimeout,
      headersTimeout: Math.min(REQUEST_TIMEOUT_MS, requestTimeout),
      connectionsCheckingInterval: Math.min(REQUEST_TIMEOUT_CHECK_MS, requestTimeout),
    },
    // `GET http://host/path` (absolute form, RFC 9112 section 3.2.2) is read as `/path` with that host (review 22)
    rewriteUrl: originFormOf,
    // Per-request access logs are off (they cost ~15% of read throughput); errors are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    routerOptions: { maxParamLength: 512, ignoreTrailingSlash: false },
    // Router-level client errors (malformed percent-encoding in the path: 400; a path parameter longer than
    // maxParamLength: 414) never reach the error handler: answer them in the spec's {error} shape, not fastify's.
    frameworkErrors: (error, _request, reply) => {
      const status = typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 400;
      const message = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is too long' : 'the request URL is not valid';
      void (reply as FastifyReply).code(status).send({ error: message });
    },
  }).withTypeProvider<ZodTypeProvider>();

  decorateReadiness(app);
  refuseWhileClosing(app);
  app.server.on('checkExpectation', answerUnsupportedExpectation);
  app.server.on('connect', answerConnect);

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  acceptEmptyJsonBodies(app);
  registerAuth(app, {
    pool: services.pool,
    pepper: services.secrets.apiKeyPepper,
    prefix: services.config.apiKeyPrefix,
    now: services.now,
    onKeysChanged: (listener) => services.runner.onBatchCommitted((name) => name === apiKeysProjection.name && listener()),
  });

  app.addHook('onRequest', requireHostHeader);
  app.addHook('onRequest', refuseEncodedBodies);

  // Postgres text and jsonb cannot hold U+0000 nor an unpaired UTF-16 surrogate (JSON "\ud800"): one anywhere in the
  // query, path or JSON body would fail deep in a query or an append (500). Refuse it up front as the client
  // mistake it is (route's error shape, 400).
  // A large body (isLargeBody: Content-Length above 256 KiB, or none) is walked in slices that give the event loop
  // turns (docs/bulk.md, "Event loop"): in one piece, 100,000 recipients held the process ~1 s. Same answers.
  app.addHook('preValidation', async (request) => {
    // a field error (not a plain one): the `fields` routes' 400 response schema accepts only that shape
    if (isLargeBody(request.headers, request.body)) {
      const where = hasUnstorableText(request.query) ? 'query' : hasUnstorableText(request.params) ? 'path' : undefined;
      if (where) throw fieldErrors({ [where]: [UNSTORABLE_MESSAGE] });
      const found = await scanInTurns(request.body, MAX_JSON_DEPTH, new Turns());
      if (found === 'unstorable') throw fieldErrors({ body: [UNSTORABLE_MESSAGE] });
      if (found === 'deep') throw fieldErrors({ body: [TOO_DEEP_MESSAGE] });
      return;
    }
    const where = hasUnstorableText(request.query) ? 'query' : hasUnstorableText(request.params) ? 'path'
      : hasUnstorableText(request.body) ? 'body' : undefined;
    if (where) throw fieldErrors({ [where]: [UNSTORABLE_MESSAGE] });
    if (nestsDeeperThan(request.body, MAX_JSON_DEPTH)) throw fieldErrors({ body: [TOO_DEEP_MESSAGE] });
  });

  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions?.url ?? 'unmatched';
    services.metrics.httpDuration.labels(request.method, route, String(reply.statusCode)).observe(reply.elapsedTime / 1000);
    if (reply.getHeader(REPLAYED_HEADER) !== undefined) services.metrics.idempotentReplays.labels(route).inc();
  });

  await app.register(fastifySwagger, {
    openapi: {
      info: {
        title: 'Switchboard API v1',
        description: 'Business messaging: export, accounts and templates, sends, contacts, business data.',
        version: '1.0.0',
      },
      components: {
        securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } },
      },
      security: [{ apiKey: [] }],
    },
    transform: jsonSchemaTransform,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });

  await registerRateLimits(app, services);
  registerIdempotency(app, services);
  registerSharedRefusalDocs(app, '/api/');
  registerRoutes(app, services);
  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;

/** Seconds a request refused during a graceful stop is told to wait (by then another instance, or this one restarted). */
export const SHUTTING_DOWN_RETRY_AFTER_S = 1;

/**
 * During a graceful stop the listener is closed and idle connections are ended, but a request can still arrive on a
 * connection whose previous request is in flight: it is refused before anything runs, with 503, `Retry-After` and
 * `Connection: close`, in the route's error shape.
 */
export function refuseWhileClosing(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // callback hooks, not async ones: they run on every request, where a promise each is measurable (bench:reads)
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    reply.header('retry-after', String(SHUTTING_DOWN_RETRY_AFTER_S));
    done(new ApiError(503, 'the server is shutting down: send the request again', 'SHUTTING_DOWN'));
  });
  // An answer finished during the stop ends its connection, and says so: left open (keep-alive), the connection held
  // the stop for the keep-alive timeout, and a client reusing it meanwhile could find it closed under its request.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
}

/**
 * JSON is the only request body the API reads: fastify's own text/plain parser is removed, so a text/plain body is
 * refused with 415, as every other type that is not JSON is (it was read as a string and got the route's 400); an
 * empty one is no body, as an empty JSON body is.
 * `Content-Type: application/json` with an empty body (`curl -X POST -H 'Content-Type: application/json' ...`) is a
 * request without a body, as the same request without the header is: a route that takes none (a cancel, a rotation)
 * serves it, and one that needs a body answers its own 400. Any other body goes to fastify's own JSON parser once its
 * bytes are UTF-8.
 */
function acceptEmptyJsonBodies(app: FastifyInstance): void {
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['application/json', 'text/plain']);
  // Bytes, not text: decoded as text, bytes that are not UTF-8 became U+FFFD and were stored so (hostile-input review,
  // 2026-11-28). JSON is UTF-8 (RFC 8259): such a body is refused whole, in the route's error shape.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    if (bytes.length === 0) return done(null, undefined);
    if (!isUtf8(bytes)) return done(new ApiError(400, NOT_UTF8_MESSAGE), undefined);
    return json(request, bytes.toString('utf8'), done);
  });
  // Review 16f: `Content-Type: text/plain` with no bytes is no body either (`fetch(url, { method: 'POST', body: '' })`
  // sends it): served before 12bad68, then 415. One with bytes is refused unread, as any other type that is not JSON.
  app.addContentTypeParser('text/plain', (request, _payload, done) => {
    const { 'content-length': length, 'transfer-encoding': chunked } = request.headers;
    if (chunked === undefined && (length === undefined || length === '0')) return done(null, undefined);
    done(new ApiError(415, 'unsupported content type: send application/json'), undefined);
  });
}
