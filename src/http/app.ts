import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance } from 'fastify';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { Services } from '../services';
import { registerAuth } from './auth';
import { registerErrorHandling } from './errors';
import { registerRoutes } from './routes';

export const DEFAULT_BODY_LIMIT = 1024 * 1024; // 1 MiB; send-bulk raises its own limit
export const REQUEST_TIMEOUT_MS = 30_000;

export interface AppOptions {
  /** pino logger options, or false (tests) */
  logger?: boolean | object;
}

/** The fastify app factory: tests build it and `inject` into it; `serve` listens. */
export async function buildApp(services: Services, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: DEFAULT_BODY_LIMIT,
    requestTimeout: REQUEST_TIMEOUT_MS,
    connectionTimeout: REQUEST_TIMEOUT_MS,
    keepAliveTimeout: 10_000,
    return503OnClosing: true,
    // Per-request access logs are off (they cost ~15% of read throughput); errors are logged by the error handler.
    disableRequestLogging: true,
    routerOptions: { maxParamLength: 512, ignoreTrailingSlash: false },
  }).withTypeProvider<ZodTypeProvider>();

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  registerAuth(app, {
    pool: services.pool,
    pepper: services.secrets.apiKeyPepper,
    prefix: services.config.apiKeyPrefix,
    now: services.now,
  });

  app.addHook('onResponse', async (request, reply) => {
    services.metrics.httpDuration
      .labels(request.method, request.routeOptions?.url ?? 'unmatched', String(reply.statusCode))
      .observe(reply.elapsedTime / 1000);
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

  registerRoutes(app, services);
  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
