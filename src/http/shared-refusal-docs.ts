// The refusals every API route shares, in the OpenAPI document (review 15c found them answered but undocumented):
// 413 and 415 on a route that takes a body (refused before the route runs), and 503 on every route (a graceful
// stop; on a write, also a write recorded whose read models did not show it in time). Each in the route's error
// shape, beside a refusal of the route's own of the same status.
import type { FastifyInstance, RouteOptions } from 'fastify';
import { alsoDescribed, type HeaderDocs, refusalBodyOf, withHeaderDocs } from './response-docs';

const retryAfter: HeaderDocs = { 'retry-after': { type: 'integer', description: 'seconds to wait before sending the request again' } };
const TAKES_A_BODY = new Set(['POST', 'PUT', 'PATCH']);

export function registerSharedRefusalDocs(app: FastifyInstance, apiPrefix: string): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.url.startsWith(apiPrefix)) return;
    const response = (route.schema as { response?: Record<string | number, unknown> } | undefined)?.response;
    if (response === undefined) return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((m) => m === 'HEAD')) return; // fastify's HEAD of a GET shares the GET's schema: documented once
    const body = refusalBodyOf(route.config?.errorShape);
    if (methods.some((m) => TAKES_A_BODY.has(m))) {
      response[413] ??= body.describe('the request body is larger than the route accepts');
      response[415] ??= body.describe('the request body is not JSON (Content-Type), or is compressed (Content-Encoding)');
    }
    const write = methods.some((m) => m !== 'GET' && m !== 'HEAD');
    const unavailable = write
      ? 'the server is stopping (SHUTTING_DOWN: send the request again), or the write was recorded but reads do not show it yet (READ_MODELS_BEHIND: read it again rather than repeating it)'
      : 'the server is stopping (SHUTTING_DOWN: send the request again)';
    response[503] = withHeaderDocs(response[503] ?? body, retryAfter, alsoDescribed(response[503], unavailable));
  });
}
