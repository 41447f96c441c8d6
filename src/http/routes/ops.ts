import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services';

/**
 * Health, readiness and metrics (no API key: operators, load balancers, Prometheus): on `serve`'s app, and on
 * `worker`'s ops listener (src/http/ops-app.ts).
 */
export function registerOpsRoutes(app: FastifyInstance, services: Services): void {
  const ops = { schema: { hide: true } };

  app.get('/healthz', ops, async () => ({ status: 'ok' }));

  app.get('/readyz', ops, async (request, reply) => {
    // a stop has begun (SHUTDOWN_DELAY_S): load balancers take this instance out while it still serves
    if (app.readiness.stopping) return reply.status(503).send({ status: 'not ready', checks: { server: 'stopping' } });
    const checks: Record<string, string> = {};
    // /readyz needs no key: a failure's own message (a host, an address, a user name, a connection string's text)
    // goes to the log, the answer says only that the check failed, or that it timed out (docs/reliability.md)
    const probe = async (name: string, fn: () => Promise<unknown>) => {
      try {
        await withTimeout(fn(), PROBE_TIMEOUT_MS);
        checks[name] = 'ok';
      } catch (err) {
        if (err instanceof ProbeTimeout) {
          checks[name] = `failing: ${err.message}`;
        } else {
          checks[name] = 'failing: see the server log';
          request.log.warn({ err, check: name }, 'readiness check failed');
        }
      }
    };
    await Promise.all([
      probe('database', () => services.pool.query('SELECT 1')),
      probe('eventStore', () => services.store.ping()),
      ...(services.transport.kind === 'kafka' ? [probe('kafka', () => services.transport.ping())] : []),
    ]);
    const ready = Object.values(checks).every((v) => v === 'ok');
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
  });

  app.get('/metrics', ops, async (_request, reply) => {
    reply.header('content-type', services.metrics.registry.contentType);
    return services.metrics.registry.metrics();
  });
}

/** The OpenAPI document (no API key). */
export function registerOpenApiRoute(app: FastifyInstance): void {
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}

const PROBE_TIMEOUT_MS = 2000;

/** A readiness check that did not answer in time: its message is ours, safe to answer. */
class ProbeTimeout extends Error {}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new ProbeTimeout(`timed out after ${ms} ms`)), ms);
    p.then((v) => { clearTimeout(t); resolve(v); }, (e) => { clearTimeout(t); reject(e); });
  });
}
