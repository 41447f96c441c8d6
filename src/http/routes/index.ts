import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services';
import { registerOpenApiRoute, registerOpsRoutes } from './ops';
import { registerAccountsRoutes } from './accounts';
import { registerBusinessRoutes } from './business';
import { registerContactRoutes } from './contacts';
import { registerSendRoutes } from './sends';
import { registerWebhookRoutes } from './webhooks';
import { registerExportRoutes } from './export';
import { registerBulkRoutes } from './bulk';
import { registerWebhookEndpointRoutes } from './webhook-endpoints';

// Explicit route registration, one line per resource group.
export function registerRoutes(app: FastifyInstance, services: Services): void {
  registerOpsRoutes(app, services);
  registerOpenApiRoute(app);
  registerBusinessRoutes(app, services);
  registerContactRoutes(app, services);
  registerAccountsRoutes(app, services);
  registerSendRoutes(app, services);
  registerWebhookRoutes(app, services);
  registerExportRoutes(app, services);
  registerBulkRoutes(app, services);
  registerWebhookEndpointRoutes(app, services);
}
