import type { Services } from '../../services';
import { handleCommand } from '../handle';
import { companyDecider, companyStreamId } from './company/decider';
import { awaitReadModels } from './read-models';

// An operator's request limit for a company (`switchboard companies rate-limit`, docs/rate-limits.md).

/** Sets a company's limit per API key and minute (null: back to the default); false when it already was that. */
export async function setCompanyRateLimit(
  services: Services,
  companyId: number,
  perMinute: number | null,
  ctx: { actor: string },
): Promise<boolean> {
  const result = await handleCommand(services.store, companyStreamId(companyId), companyDecider, {
    type: 'SetRateLimit', data: { companyId, perMinute },
  }, { actor: ctx.actor, companyId, now: services.now });
  await awaitReadModels(services, result.position, result.events.map((e) => e.type));
  return result.events.length > 0;
}
