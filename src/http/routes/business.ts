import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { getBusinessHours, getBusinessInfo, getHolidays } from '../../projections/business/queries';
import { BUSINESS_CHANGED_CHANNEL } from '../../projections/change-signals';
import { readCacheOf } from '../read-cache';
import type { Services } from '../../services';
import { requireCompany } from '../auth';
import { ApiError } from '../errors';

// Read-only business data of the key's company: profile, fixed opening hours by branch, holidays.

const errorBody = z.object({ error: z.string() });
const date = z.iso.date('must be a date YYYY-MM-DD');
const branchType = z.enum(['PHYSICAL', 'ONLINE']);

const businessInfo = z.object({
  id: z.number().int(),
  name: z.string(),
  email: z.string(),
  phone: z.string(),
  website: z.string(),
  address: z.string(),
  description: z.string(),
  timezone: z.string().describe('IANA time zone'),
  companySize: z.enum(['MICRO', 'SMALL', 'MEDIUM', 'LARGE', 'ENTERPRISE']).nullable(),
  companySizeDisplay: z.string().nullable().describe('e.g. "11-50 employees"'),
  companyTypes: z.array(z.enum(['ECOMMERCE', 'CLINIC'])),
  categories: z.array(z.string()),
});

const schedule = z.object({
  id: z.number().int(),
  days: z.array(z.enum(['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY', 'SUNDAY'])),
  daysDisplay: z.string().describe('"Monday to Friday", "Monday, Wednesday", "Every day"; the date for a specific-date schedule'),
  startTime: z.string().describe('HH:MM:SS'),
  finishAt: z.string().describe('HH:MM:SS'),
  isActive: z.boolean(),
  description: z.string(),
  specificDate: z.string().nullable().describe('YYYY-MM-DD; null for weekly schedules'),
});

const branchHours = z.object({
  branchId: z.number().int(),
  branchName: z.string(),
  branchType,
  address: z.string(),
  schedules: z.array(schedule),
});

const branchDetail = z.object({
  id: z.number().int(),
  company: z.number().int(),
  name: z.string(),
  address: z.string(),
  phone: z.string(),
  branchType,
  createdAt: z.string(),
  updatedAt: z.string(),
});

const holiday = z.object({
  id: z.number().int(),
  company: z.number().int(),
  name: z.string(),
  description: z.string(),
  date: z.string().describe('YYYY-MM-DD'),
  branches: z.array(z.number().int()).describe('branch ids; empty means all branches'),
  branchesDetail: z.array(branchDetail).describe('the branches listed in `branches`'),
  attentionTarget: z.enum(['VIRTUAL_ATTENTION', 'BRANCH', 'ALL_BRANCHES', 'ALL']),
  hasCustomHours: z.boolean(),
  startTime: z.string().nullable(),
  finishAt: z.string().nullable(),
  isActive: z.boolean(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const hoursList = z.array(branchHours);
const holidayList = z.array(holiday);

/** Sends JSON serialized beforehand (a string payload skips the response serializer). */
export function sendJson(reply: FastifyReply, json: string): FastifyReply {
  return reply.header('content-type', 'application/json; charset=utf-8').send(json as never);
}

export function registerBusinessRoutes(fastify: FastifyInstance, services: Services): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const cache = readCacheOf(fastify, services.pool);
  // The cache holds each company's responses already serialized (through the response schemas, so exactly what
  // the serializer would write); a hit is sent as is.
  const cached = <T>(companyId: number, what: string, load: () => Promise<T>) =>
    cache.get(BUSINESS_CHANGED_CHANNEL, companyId, what, services.now().getTime(), load);
  const config = { errorShape: 'plain' as const };
  // Authentication runs on onRequest, before query validation: an unauthenticated caller gets 401, not 400.
  const onRequest = async (request: Parameters<typeof app.authenticate>[0]) => {
    await app.authenticate(request, 'company');
  };
  const companyOf = (request: Parameters<typeof app.authenticate>[0]) => requireCompany(request.apiKey!).companyId;

  app.get('/api/v1/business-info/', {
    config,
    onRequest,
    schema: {
      tags: ['business'],
      operationId: 'getBusinessInfo', summary: "The business profile of the key's company",
      response: { 200: businessInfo, 401: errorBody, 403: errorBody, 404: errorBody },
    },
  }, async (request, reply) => {
    const companyId = companyOf(request);
    const json = await cached(companyId, 'info', async () => {
      const info = await getBusinessInfo(services.pool, companyId);
      return info ? JSON.stringify(businessInfo.parse(info)) : null;
    });
    if (json === null) throw new ApiError(404, 'company not found');
    return sendJson(reply, json);
  });

  app.get('/api/v1/business-hours/', {
    config,
    onRequest,
    schema: {
      tags: ['business'],
      operationId: 'listBusinessHours', summary: 'Fixed opening hours by branch (no date filtering)',
      response: { 200: hoursList, 401: errorBody, 403: errorBody },
    },
  }, async (request, reply) => {
    const companyId = companyOf(request);
    const json = await cached(companyId, 'hours', async () => JSON.stringify(hoursList.parse(await getBusinessHours(services.pool, companyId))));
    return sendJson(reply, json);
  });

  app.get('/api/v1/holidays/', {
    config,
    onRequest,
    schema: {
      tags: ['business'],
      operationId: 'listHolidays', summary: 'Holidays of the company, by date (from/to inclusive)',
      querystring: z.object({
        from: date.optional().describe('YYYY-MM-DD, inclusive'),
        to: date.optional().describe('YYYY-MM-DD, inclusive'),
      }),
      response: { 200: holidayList, 400: errorBody, 401: errorBody, 403: errorBody },
    },
  }, async (request, reply) => {
    const companyId = companyOf(request);
    // all of the company's holidays (by date) are cached; the range is applied here
    const all = await cached(companyId, 'holidays', async () => {
      const list = holidayList.parse(await getHolidays(services.pool, companyId));
      return { list, json: JSON.stringify(list) };
    });
    const { from, to } = request.query;
    if (from === undefined && to === undefined) return sendJson(reply, all.json);
    return sendJson(reply, JSON.stringify(all.list.filter((h) => (from === undefined || h.date >= from) && (to === undefined || h.date <= to))));
  });
}
