import type { FastifyInstance } from 'fastify';

/** Whether a graceful stop has begun: /readyz then answers 503 while every other route is still served. */
export interface Readiness {
  stopping: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    readiness: Readiness;
  }
}

export function decorateReadiness(app: FastifyInstance): void {
  app.decorate('readiness', { stopping: false });
}
