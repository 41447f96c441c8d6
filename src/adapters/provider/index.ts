import type { Config } from '../../config';
import type { MessagingProvider } from '../../ports/provider';
import type { RecordTransport } from '../../ports/transport';
import { CloudApiProvider } from './cloud-api';
import { SandboxProvider } from './sandbox';

/** Picks the provider adapter from config (composition root and tests only). */
export function createProvider(
  config: Config['provider'],
  transport: RecordTransport,
  logger?: { warn(obj: object, msg?: string): void },
): MessagingProvider {
  if (config.kind === 'cloud-api') {
    if (!config.accessToken) throw new Error('PROVIDER_ACCESS_TOKEN is required for PROVIDER=cloud-api');
    return new CloudApiProvider({ baseUrl: config.baseUrl, apiVersion: config.apiVersion, accessToken: config.accessToken, logger });
  }
  return new SandboxProvider({ delivery: config.sandboxDelivery, transport, logger });
}
