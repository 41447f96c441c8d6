import type { Projection } from './projection';
import { apiKeysProjection } from './apikeys/projection';
import { sendsProjection } from './sends/projection';
import { accountsProjection } from './accounts/projection';
import { businessProjection } from './business/projection';
import { contactsProjection } from './contacts/projection';
import { conversationsProjection } from './conversations/projection';
import { bulkProjection } from './bulk/projection';
import { rateLimitsProjection } from './ratelimits/projection';
import { webhooksProjection } from './webhooks/projection';

// Every read model, one import line per projection. Add new projections here.
export const allProjections: readonly Projection[] = [apiKeysProjection, sendsProjection, businessProjection, accountsProjection, contactsProjection, conversationsProjection, bulkProjection, rateLimitsProjection, webhooksProjection];

export function projectionByName(name: string): Projection | undefined {
  return allProjections.find((p) => p.name === name);
}
