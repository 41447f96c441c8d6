import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services';
import { registerOpsRoutes } from './ops';

// Explicit route registration, one line per resource group.
export function registerRoutes(app: FastifyInstance, services: Services): void {
  registerOpsRoutes(app, services);
}
