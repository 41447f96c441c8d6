import fastifyRateLimit, { type RateLimitOptions } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { rateLimitsProjection } from '../projections/ratelimits/projection';
import type { Services } from '../services';
import { ApiError } from './errors';
import { RateLimitCounter, storeOf } from './rate-limit-store';
import { documentAnswer, documentedAnswersOf, type HeaderDocs, refusalBodyOf } from './response-docs';

// Request rate limits per API key (docs/rate-limits.md) with @fastify/rate-limit: every authenticated request
// counts against its key's window, whose size is the key's company's limit (or RATE_LIMIT_PER_MINUTE).
// Requests without an authenticated key (health, metrics, docs, the provider webhook ingress, a rejected key)
// are not counted. Over the limit: 429 RATE_LIMITED in the route's error shape with Retry-After. The RateLimit-*
// headers are on every 429 and, on other answers, once the key has used half of its window (the IETF draft's
// "Performance Considerations": fields only when a quota is close to exhaustion).

export const RATE_LIMIT_WINDOW_MS = 60_000;
/** Answers under the limit carry the RateLimit-* headers once this share of the key's window is used. */
const RATE_LIMIT_HEADERS_FROM_USED = 0.5;
const LIMITS_REFRESH_MS = 5_000;
const NOT_COUNTED: Promise<void> = Promise.resolve();
/** The API's routes, which all authenticate first (src/http/auth.ts); the others have no key to count. */
const API_PATHS = '/api/';

declare module 'fastify' {
  interface FastifyInstance {
    /** the shared counter (tests sync it by hand); absent when rate limiting is off */
    rateLimitCounter?: RateLimitCounter;
  }
}

export async function registerRateLimits(app: FastifyInstance, services: Services): Promise<void> {
  const { enabled, perMinute, syncMs } = services.config.rateLimit;
  if (!enabled) return;
  const counter = new RateLimitCounter(services.pool, {
    windowMs: RATE_LIMIT_WINDOW_MS,
    syncMs,
    limitsRefreshMs: LIMITS_REFRESH_MS,
    now: () => services.now().getTime(),
    onError: (err, what) => services.logger.warn({ err }, `rate limits: failed ${what}; counting locally until it succeeds`),
  });
  app.decorate('rateLimitCounter', counter);
  // a limit set through this process applies at once; set through another, within LIMITS_REFRESH_MS
  const unsubscribe = services.runner.onBatchCommitted((name) => name === rateLimitsProjection.name && void counter.refreshLimits());
  app.addHook('onReady', () => counter.start());
  app.addHook('onClose', async () => {
    unsubscribe();
    await counter.stop();
  });

  await app.register(fastifyRateLimit, {
    global: false,
    enableDraftSpec: true,
    timeWindow: RATE_LIMIT_WINDOW_MS,
    max: perMinute,
    keyGenerator: (request) => request.apiKey!.keyId,
    store: storeOf(counter) as never,
    errorResponseBuilder: (_request, context) =>
      new ApiError(
        429,
        `rate limit exceeded: at most ${context.max} ${context.max === 1 ? 'request' : 'requests'} per minute per API key; retry in ${Math.max(1, Math.ceil(context.ttl / 1000))} seconds`,
        'RATE_LIMITED',
      ),
  });

  // The key is known once authentication's `identify` ran (below: where the limit is checked).
  // Handlers per limit, each with its limit as a number (a `max` function would be awaited on every request): one
  // that adds the RateLimit-* headers to answers under the limit, one that adds them to 429s only (the plugin's
  // `addHeadersOnExceeding`), for keys far from their limit. Writing the three headers was about half of the
  // limiter's cost per read (docs/rate-limits.md, "Cost").
  type Handler = ReturnType<FastifyInstance['rateLimit']>;
  const withHeaders = new Map<number, Handler>();
  const without = new Map<number, Handler>();
  const noHeadersUnderTheLimit = { 'ratelimit-limit': false, 'ratelimit-remaining': false, 'ratelimit-reset': false };
  const handlerOf = (max: number, headers: boolean) => {
    const handlers = headers ? withHeaders : without;
    let handler = handlers.get(max);
    if (handler === undefined) {
      // the plugin's README: a handler takes the settings of the plugin's registration (its types list fewer)
      handler = app.rateLimit((headers ? { max } : { max, addHeadersOnExceeding: noHeadersUnderTheLimit }) as RateLimitOptions);
      handlers.set(max, handler);
    }
    return handler;
  };
  // Not an async function: it hands back the plugin's own promise (or a settled one) instead of wrapping it in
  // another, which took about 1 µs of a 3-4 µs limiter per request (docs/rate-limits.md, "Cost").
  const limitAuthenticated = (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const key = request.apiKey;
    if (key === null) return NOT_COUNTED;
    const max = (key.companyId !== null ? counter.companyLimit(key.companyId) : undefined) ?? perMinute;
    // this request included (the plugin counts it next)
    const headers = counter.used(key.keyId) + 1 >= max * RATE_LIMIT_HEADERS_FROM_USED;
    return handlerOf(max, headers).call(app, request as never, reply as never) as Promise<void>;
  };
  // On every API route the limit is checked on onRequest, right after authentication's `identify` (which registerAuth
  // puts first on every /api/ route, and registers its onRoute hook before this one): before the route's own key
  // policy (a global key's 403 on a company route counts), before the body is read and parsed (a limited key's
  // malformed JSON is 429, not 400, and a limited key's large bulk body is not parsed to be refused), and before every
  // preValidation check. Until 2026-11-27 it ran on preValidation: none of those requests counted and a limited key's
  // got their 400 or 403 (found in review; test/api/review-ratelimit-http.test.ts). Other routes have no API key.
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.url.startsWith(API_PATHS)) return;
    const [identify, ...own] = asList(route.onRequest);
    route.onRequest = [...(identify === undefined ? [] : [identify]), limitAuthenticated, ...own] as typeof route.onRequest;
    const answers = documentedAnswersOf(route);
    if (answers !== undefined) documentAnswer(answers, 429, refusalBodyOf(route.config?.errorShape), LIMITED, limitHeaderDocs);
  });
}

const limitHeaderDocs: HeaderDocs = {
  'retry-after': { type: 'integer', description: 'seconds until the window ends' },
  'ratelimit-limit': { type: 'integer', description: "the API key's requests per minute" },
  'ratelimit-remaining': { type: 'integer', description: 'requests left in the window (0)' },
  'ratelimit-reset': { type: 'integer', description: 'seconds until the window ends' },
};

/** The 429 of a counted route, in its OpenAPI description (in the route's error shape). */
const LIMITED = 'the API key made more requests this minute than its limit (RATE_LIMITED)';

const asList = <T>(hooks: T | T[] | undefined): T[] => (hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks]);
