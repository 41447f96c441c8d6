// The refusals every API route shares, in the OpenAPI document (review 15c found them answered but undocumented):
// 413 and 415 on a route that takes a body (refused before the route runs), and 503 on every route (a graceful
// stop; on a write, also a write recorded whose read models did not show it in time). Each in the route's error
// shape, beside a refusal of the route's own of the same status; the 503 also when the database is unavailable
// (DATABASE_UNAVAILABLE, src/http/errors.ts).
import type { FastifyInstance, RouteOptions } from 'fastify';
import { documentAnswer, documentedAnswersOf, type HeaderDocs, refusalBodyOf } from './response-docs';
import { methodsOf } from './route-methods';

const retryAfter: HeaderDocs = { 'retry-after': { type: 'integer', description: 'seconds to wait before sending the request again' } };
const TAKES_A_BODY = new Set(['POST', 'PUT', 'PATCH']);
const OUTCOME_UNKNOWN = 'the database became unavailable while the request ran, after it may have made changes: its outcome is unknown. '
  + 'Send it again with the same Idempotency-Key where the route takes one (it takes effect at most once), else check its outcome before sending it again';

export function registerSharedRefusalDocs(app: FastifyInstance, apiPrefix: string): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.url.startsWith(apiPrefix)) return;
    const answers = documentedAnswersOf(route);
    if (answers === undefined) return;
    const methods = methodsOf(route);
    const body = refusalBodyOf(route.config?.errorShape);
    if (methods.some((m) => TAKES_A_BODY.has(m))) {
      documentAnswer(answers, 413, body, 'the request body is larger than the route accepts');
      documentAnswer(answers, 415, body, 'the request body is not JSON (Content-Type), is declared in a charset other than UTF-8, or is compressed (Content-Encoding)');
    }
    const write = methods.some((m) => m !== 'GET' && m !== 'HEAD');
    const unavailable = write
      ? 'the server is stopping (SHUTTING_DOWN: send the request again), the database is unavailable (DATABASE_UNAVAILABLE: nothing was done; send the request again after Retry-After), or the write was recorded but reads do not show it yet (READ_MODELS_BEHIND: read it again rather than repeating it)'
      : 'the server is stopping (SHUTTING_DOWN: send the request again), or the database is unavailable (DATABASE_UNAVAILABLE: send the request again after Retry-After)';
    documentAnswer(answers, 503, body, unavailable, retryAfter);
    if (write) documentAnswer(answers, 500, body, OUTCOME_UNKNOWN);
  });
}
