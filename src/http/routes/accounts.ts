import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { MESSAGING_TIERS, VARIABLE_TYPES } from '../../events/provisioning';
import { getBusinessAccounts } from '../../projections/accounts/queries';
import { ACCOUNTS_CHANGED_CHANNEL } from '../../projections/change-signals';
import { readCacheOf } from '../read-cache';
import { sendJson } from './business';
import type { Services } from '../../services';
import { requireCompany } from '../auth';
import { ApiError } from '../errors';

// The messaging accounts of the key's company: numbers, quota, approved templates.

const errorBody = z.object({ error: z.string() });

const quota = z.object({
  dailyLimit: z.number().int().describe('unique recipients per rolling 24 h; TIER_UNLIMITED reports 9007199254740991 (2^53 - 1)'),
  uniqueNumbersSent24h: z.number().int(),
  remaining: z.number().int(),
  usagePercentage: z.number().describe('0-100, two decimals'),
  canSend: z.boolean(),
});

const template = z.object({
  name: z.string().describe('the value sent as template_name'),
  language: z.string(),
  category: z.string(),
  variables: z.array(z.object({
    name: z.string(),
    type: z.enum(VARIABLE_TYPES),
    position: z.number().int(),
    isRequired: z.boolean(),
    component: z.enum(['HEADER', 'BODY', 'FOOTER', 'BUTTON']),
  })),
  buttons: z.array(z.object({
    type: z.enum(['URL', 'QUICK_REPLY', 'PHONE_NUMBER', 'COPY_CODE']),
    text: z.string(),
    url: z.string().optional(),
    phoneNumber: z.string().optional(),
  })),
});

const phoneNumbers = z.array(z.object({
  id: z.number().int(),
  phoneNumberId: z.string().describe('the value sent as phone_number_id'),
  displayPhoneNumber: z.string(),
  verifiedName: z.string(),
  businessName: z.string(),
  isPrimary: z.boolean(),
  messagingLimitTier: z.enum(MESSAGING_TIERS),
  quota,
  templates: z.array(template).describe('APPROVED templates only'),
}));

const businessAccounts = z.object({
  companyName: z.string(),
  apiKeyName: z.string().describe('name of the API key used'),
  phoneNumbers,
});

export function registerAccountsRoutes(fastify: FastifyInstance, services: Services): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const cache = readCacheOf(fastify, services.pool);
  app.get('/api/v1/business-accounts/', {
    config: { errorShape: 'plain' },
    onRequest: async (request) => {
      await app.authenticate(request, 'company');
    },
    schema: {
      tags: ['accounts'],
      operationId: 'listBusinessAccounts', summary: "Messaging accounts of the key's company: numbers, quota and approved templates",
      response: { 200: businessAccounts, 401: errorBody, 403: errorBody, 404: errorBody },
    },
  }, async (request, reply) => {
    const key = requireCompany(request.apiKey!);
    const now = services.now();
    // cached per company, serialized through the response schema; only the key's name differs per request
    const cached = await cache.get(ACCOUNTS_CHANGED_CHANNEL, key.companyId, 'accounts', now.getTime(), async () => {
      const accounts = await getBusinessAccounts(services.pool, key.companyId, now);
      if (!accounts) return undefined;
      return {
        companyName: JSON.stringify(accounts.companyName),
        phoneNumbers: JSON.stringify(phoneNumbers.parse(accounts.phoneNumbers)),
        quotaStableUntil: accounts.quotaStableUntil,
      };
    }, (a) => a?.quotaStableUntil);
    if (!cached) throw new ApiError(404, 'company not found');
    return sendJson(reply, `{"companyName":${cached.companyName},"apiKeyName":${JSON.stringify(key.name)},"phoneNumbers":${cached.phoneNumbers}}`);
  });
}
