import Fastify, { type FastifyInstance } from 'fastify';
import type { Services } from '../services';
import { refuseWhileClosing } from './app';
import { registerErrorHandling } from './errors';
import { registerOpsRoutes } from './routes/ops';
import { decorateReadiness } from './stop-readiness';

/**
 * `worker`'s ops listener (WORKER_OPS_PORT): /healthz, /readyz and /metrics only, so a worker can be probed and
 * scraped like `serve` (its fan-out, sender, bulk dispatcher and projection runner count on its own registry). No
 * API routes, no API key; anything else is a 404 in the API's error shape.
 */
export async function buildOpsApp(services: Services, options: { logger?: boolean | object } = {}): Promise<FastifyInstance> {
  const app = Fastify({ logger: options.logger ?? false, return503OnClosing: false, keepAliveTimeout: 10_000 });
  registerErrorHandling(app);
  decorateReadiness(app);
  refuseWhileClosing(app);
  registerOpsRoutes(app, services);
  return app;
}
