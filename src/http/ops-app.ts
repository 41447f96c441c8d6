import Fastify, { type FastifyInstance } from 'fastify';
import type { Services } from '../services';
import { refuseWhileClosing } from './app';
import { registerErrorHandling } from './errors';
import { answerClientError } from './protocol-guards';
import { registerOpsRoutes } from './routes/ops';
import { decorateReadiness } from './stop-readiness';

/**
 * The time a request to the ops listener has to arrive whole, headers included: its routes are GETs without a body,
 * which a probe or Prometheus sends at once. A client sending slower (or half a request, then nothing) gets 408.
 */
export const OPS_REQUEST_TIMEOUT_MS = 10_000;
/** A connection silent for it is closed; above /readyz's longest answer (its probes' 2-s timeout) and a scrape's. */
export const OPS_CONNECTION_TIMEOUT_MS = 30_000;
/** How often Node looks for requests past their timeout (its default, 30 s, would make 10 s up to 40 s). */
export const OPS_TIMEOUT_CHECK_MS = 1_000;

export interface OpsAppOptions {
  /** pino logger options, or false (tests) */
  logger?: boolean | object;
  /** the time a request has to arrive whole (default OPS_REQUEST_TIMEOUT_MS; tests use a shorter one) */
  requestTimeoutMs?: number;
}

/**
 * `worker`'s ops listener (WORKER_OPS_PORT): /healthz, /readyz and /metrics only, so a worker can be probed and
 * scraped like `serve` (its fan-out, sender, bulk dispatcher and projection runner count on its own registry). No
 * API routes, no API key; anything else is a 404 in the API's error shape. Its timeouts go to Node's constructor,
 * as the API app's do (set afterwards, Node's 60-s headers timeout held: review 22); a request not received in time
 * is 408 `{error}` and its connection closed (review 23).
 */
export async function buildOpsApp(services: Services, options: OpsAppOptions = {}): Promise<FastifyInstance> {
  const requestTimeout = options.requestTimeoutMs ?? OPS_REQUEST_TIMEOUT_MS;
  const app = Fastify({
    logger: options.logger ?? false,
    return503OnClosing: false,
    requestTimeout,
    connectionTimeout: OPS_CONNECTION_TIMEOUT_MS,
    keepAliveTimeout: 10_000,
    clientErrorHandler: answerClientError,
    http: {
      requestTimeout,
      headersTimeout: requestTimeout,
      connectionsCheckingInterval: Math.min(OPS_TIMEOUT_CHECK_MS, requestTimeout),
    },
  });
  registerErrorHandling(app);
  decorateReadiness(app);
  refuseWhileClosing(app);
  registerOpsRoutes(app, services);
  return app;
}
