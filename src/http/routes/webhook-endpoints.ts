// Client webhook endpoints (docs/webhooks.md): CRUD, secret rotation, the delivery log, retry, recovery of failed
// deliveries and a test event.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  createWebhookEndpoint, deleteWebhookEndpoint, rotateWebhookSecret, updateWebhookEndpoint, type WebhookEndpointDeps, webhookEndpointDepsOf,
} from '../../commands/webhook-endpoint/handler';
import { webhookBody, webhookIdOf } from '../../commands/webhook-endpoint/payload';
import { secretBox } from '../../commands/webhook-endpoint/secrets';
import { urlRefusal } from '../../adapters/webhooks/address-guard';
import { WEBHOOK_EVENT_TYPES } from '../../events/webhooks';
import {
  clearFailureStreak, dropPendingDeliveries, listDeliveryAttempts, queueDeliveries, requeueDelivery, requeueFailedDeliveries, resumeDeliveries, setAsideWhileDisabled,
  setDeliveriesAside,
} from '../../projections/webhooks/deliveries';
import { findWebhookEndpoint, listWebhookEndpoints, type WebhookEndpointRow } from '../../projections/webhooks/queries';
import type { Services } from '../../services';
import { requireCompany } from '../auth';
import { badRequest, conflict, notFound } from '../errors';
import { DomainError } from '../../commands/decider';
import { linkWith, pageParam } from '../page-links';

const BASE = '/api/v1/webhook-endpoints/';
const MAX_PAGE_SIZE = 100;

const eventTypesSchema = z.array(z.enum(WEBHOOK_EVENT_TYPES, { error: `event types must be among: ${WEBHOOK_EVENT_TYPES.join(', ')}` }), { error: 'event_types must be an array' })
  .min(1, 'event_types must name at least one event type')
  .transform((types) => [...new Set(types)]);
const urlSchema = z.string({ error: 'url is required and must be a string' }).trim().min(1, 'url is required').max(2048, 'url is too long');
const descriptionSchema = z.string({ error: 'description must be a string or null' }).max(500, 'description is too long').nullable();

const createBody = z.object({ url: urlSchema, event_types: eventTypesSchema, description: descriptionSchema.optional() }).strict();
const patchBody = z.object({
  url: urlSchema.optional(), event_types: eventTypesSchema.optional(), description: descriptionSchema.optional(),
  enabled: z.boolean({ error: 'enabled must be a boolean' }).optional(),
}).strict();
const instant = (name: string) => z.iso.datetime({ offset: true, error: `${name} must be an ISO 8601 date-time with a time zone (2026-03-01T10:00:00Z)` });
const recoverBody = z.object({ since: instant('since'), until: instant('until').optional() }).strict()
  .refine((b) => b.until === undefined || Date.parse(b.until) > Date.parse(b.since), { error: 'until must be later than since' });
/** deliveries queued again by one recovery call (in statements of RECOVER_BATCH); `has_more` tells the client to call again */
const RECOVER_MAX = 100_000;
const RECOVER_BATCH = 1_000;
const idParams = z.object({ id: z.string() });
const deliveryParams = z.object({ id: z.string(), delivery_id: z.string() });
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/**
 * A page number or size: decimal digits only, as on the bulk lists (`0x10`, `0b11`, `1e3`, ` 1`, `1.0`, `+1` are no
 * numbers here), a safe integer from 1. Checked on the text, then converted: no transform, so the OpenAPI document
 * keeps its integer with the default (as z.coerce.number documented it).
 */
const positiveInt = (name: string, fallback: number) => {
  const message = `${name} must be a positive integer`;
  const isPositiveInt = (v: string) => /^[0-9]+$/.test(v) && Number.isSafeInteger(Number(v)) && Number(v) >= 1;
  return z.string({ error: message }).refine(isPositiveInt, message).pipe(z.coerce.number()).default(fallback)
    .meta({ type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER });
};
const pageQuery = z.object({
  page: positiveInt('page', 1),
  page_size: positiveInt('page_size', 20),
});

const ATTEMPT_ID = 'must be an attempt id (a positive integer)';
const attemptId = (what: string) => z.string().regex(/^[1-9][0-9]{0,15}$/, ATTEMPT_ID).transform(Number).refine(Number.isSafeInteger, ATTEMPT_ID).optional()
  .describe(`only attempts ${what === 'before' ? 'older' : 'newer'} than this attempt id`);
const attemptsPageQuery = pageQuery.extend({
  before: attemptId('before'),
  after: attemptId('after'),
}).refine((q) => q.before === undefined || q.after === undefined, { message: 'before and after cannot be used together', path: ['after'] });

const endpointSchema = z.object({
  id: z.string(), url: z.string(), event_types: z.array(z.string()), description: z.string().nullable(), enabled: z.boolean(),
  disabled_reason: z.string().nullable(), created_at: z.string(), updated_at: z.string(),
});
const withSecret = endpointSchema.extend({ secret: z.string() });
const errorSchema = z.object({ error: z.string() });
const attemptSchema = z.object({
  id: z.number().int(), delivery_id: z.string(), webhook_id: z.string(), event_type: z.string(), attempted_at: z.string(),
  status_code: z.number().int().nullable(), latency_ms: z.number().int(), error: z.string().nullable(), next_retry_at: z.string().nullable(),
  delivery_status: z.string(),
});
const queuedSchema = z.object({ delivery_id: z.string().nullable(), webhook_id: z.string(), status: z.literal('queued') });

const view = (e: WebhookEndpointRow) => ({
  id: e.endpointId, url: e.url, event_types: e.eventTypes, description: e.description, enabled: e.enabled,
  disabled_reason: e.disabledReason, created_at: e.createdAt.toISOString(), updated_at: e.updatedAt.toISOString(),
});

export function registerWebhookEndpointRoutes(app: FastifyInstance, services: Services): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const deps: WebhookEndpointDeps = webhookEndpointDepsOf(services);
  const urlRules = { allowHttp: services.config.webhooks.allowHttp, allowPrivate: services.config.webhooks.allowPrivateUrls };
  const checkUrl = (url: string | undefined) => {
    const refusal = url === undefined ? null : urlRefusal(url, urlRules);
    if (refusal) throw badRequest(refusal);
  };
  // the key's policy on onRequest, before the body, query and path are validated: a global key is 403, never a 400
  const auth = async (request: FastifyRequest) => {
    await app.authenticate(request, 'company');
  };
  const who = (request: FastifyRequest) => {
    const key = requireCompany(request.apiKey!);
    return { actor: key.keyId, companyId: key.companyId };
  };
  const endpointOf = async (request: FastifyRequest, id: string) => {
    const found = UUID.test(id) ? await findWebhookEndpoint(services.pool, who(request).companyId, id) : undefined;
    if (!found) throw notFound('webhook endpoint not found');
    return found;
  };
  const tags = ['webhook-endpoints'];
  const plain = { errorShape: 'plain' as const };

  r.post(BASE, {
    config: { ...plain, idempotent: true },
    schema: {
      tags, operationId: 'createWebhookEndpoint', summary: 'Register a webhook endpoint (the signing secret is returned only here)', body: createBody,
      description: 'A company has at most WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY endpoints (default 100): 409 once it has them.',
      response: { 201: withSecret, 400: errorSchema, 401: errorSchema, 403: errorSchema, 409: errorSchema },
    },
    onRequest: auth,
  }, async (request, reply) => {
    checkUrl(request.body.url);
    const { endpointId, secret } = await createWebhookEndpoint(deps, who(request), {
      url: request.body.url, eventTypes: request.body.event_types, description: request.body.description ?? null,
    }, request.idempotencyKey).catch((err: unknown) => {
      throw err instanceof DomainError && err.code === 'ENDPOINT_LIMIT' ? conflict(err.message) : err;
    });
    return reply.status(201).send({ ...view(await endpointOf(request, endpointId)), secret });
  });

  r.get(BASE, {
    config: plain,
    schema: { tags, operationId: 'listWebhookEndpoints', summary: "The company's webhook endpoints", response: { 200: z.object({ results: z.array(endpointSchema) }), 401: errorSchema, 403: errorSchema } },
    onRequest: auth,
  }, async (request) => ({ results: (await listWebhookEndpoints(services.pool, who(request).companyId)).map(view) }));

  r.get(`${BASE}:id/`, {
    config: plain,
    schema: { tags, operationId: 'getWebhookEndpoint', summary: 'One webhook endpoint', params: idParams, response: { 200: endpointSchema, 401: errorSchema, 404: errorSchema } },
    onRequest: auth,
  }, async (request) => view(await endpointOf(request, request.params.id)));

  r.patch(`${BASE}:id/`, {
    config: plain,
    schema: { tags, operationId: 'updateWebhookEndpoint', summary: 'Change url, event types or description; enable or disable', params: idParams, body: patchBody, response: { 200: endpointSchema, 400: errorSchema, 401: errorSchema, 404: errorSchema } },
    onRequest: auth,
  }, async (request) => {
    const current = await endpointOf(request, request.params.id);
    checkUrl(request.body.url);
    const b = request.body;
    // before the change, so no answer to a resumed delivery meets the old streak (docs/webhooks.md, "Delivery")
    if ((b.enabled === true && !current.enabled) || (b.url !== undefined && b.url !== current.url)) await clearFailureStreak(services.pool, request.params.id);
    await updateWebhookEndpoint(deps, who(request), request.params.id, { url: b.url, eventTypes: b.event_types, description: b.description, enabled: b.enabled });
    if (b.enabled === false) await setDeliveriesAside(services.pool, request.params.id);
    if (b.enabled === true) await resumeDeliveries(services.pool, request.params.id, services.now());
    return view(await endpointOf(request, request.params.id));
  });

  r.delete(`${BASE}:id/`, {
    config: plain,
    schema: { tags, operationId: 'deleteWebhookEndpoint', summary: 'Delete a webhook endpoint (its queued deliveries are dropped)', params: idParams, response: { 204: z.null().meta({ type: 'null', description: 'deleted (no body)' }), 401: errorSchema, 404: errorSchema } },
    onRequest: auth,
  }, async (request, reply) => {
    await endpointOf(request, request.params.id);
    await deleteWebhookEndpoint(deps, who(request), request.params.id);
    await dropPendingDeliveries(services.pool, request.params.id, services.now());
    return reply.status(204).send(null);
  });

  r.post(`${BASE}:id/rotate-secret/`, {
    config: { ...plain, idempotent: true },
    schema: { tags, operationId: 'rotateWebhookEndpointSecret', summary: 'A new signing secret; the previous one keeps signing alongside it for 24 h', params: idParams, response: { 200: withSecret, 401: errorSchema, 404: errorSchema } },
    onRequest: auth,
  }, async (request) => {
    await endpointOf(request, request.params.id);
    const secret = await rotateWebhookSecret(deps, who(request), request.params.id, request.idempotencyKey);
    return { ...view(await endpointOf(request, request.params.id)), secret };
  });

  r.get(`${BASE}:id/deliveries/`, {
    config: plain,
    schema: {
      tags, operationId: 'listWebhookDeliveries', summary: 'Delivery attempts, newest first (paged; `next` continues after the page\'s last attempt with `before`, `previous` before its first with `after`)', params: idParams, querystring: attemptsPageQuery,
      response: { 200: z.object({ count: z.number().int(), next: z.string().nullable(), previous: z.string().nullable(), results: z.array(attemptSchema) }), 400: errorSchema, 401: errorSchema, 404: errorSchema },
    },
    onRequest: auth,
  }, async (request) => {
    await endpointOf(request, request.params.id);
    const { page, page_size, before, after } = request.query;
    const limit = Math.min(page_size, MAX_PAGE_SIZE);
    const { count, olderFollow, newerFollow, rows } = await listDeliveryAttempts(services.pool, request.params.id, { limit, offset: (page - 1) * limit, before, after });
    // keyset both ways, from this page's last and first attempts (as cheap at any depth, and no repeats or gaps while
    // new attempts arrive); a page past the end goes back by page number, to the last page (none when nothing is logged)
    const first = rows[0];
    const last = rows[rows.length - 1];
    const newer = newerFollow ?? (page > 1 && (first !== undefined || count > 0));
    const back = first ? page - 1 : Math.min(page - 1, Math.ceil(count / limit));
    return {
      count,
      next: olderFollow && (last || after) ? linkWith(request, { page: String(page + 1), before: String(last ? last.attemptId : after! + 1), after: null }) : null,
      previous: !newer ? null : linkWith(request, { page: pageParam(Math.max(1, back)), before: null, after: first ? String(first.attemptId) : null }),
      results: rows.map((a) => ({
        id: a.attemptId, delivery_id: a.deliveryId, webhook_id: a.webhookId, event_type: a.eventType, attempted_at: a.attemptedAt.toISOString(),
        status_code: a.statusCode, latency_ms: a.latencyMs, error: a.error, next_retry_at: a.nextRetryAt?.toISOString() ?? null, delivery_status: a.deliveryStatus,
      })),
    };
  });

  r.post(`${BASE}:id/deliveries/:delivery_id/retry/`, {
    config: { ...plain, idempotent: true },
    schema: { tags, operationId: 'retryWebhookDelivery', summary: 'Deliver again now (a failed delivery starts a fresh retry schedule)', params: deliveryParams, response: { 202: queuedSchema, 401: errorSchema, 404: errorSchema } },
    onRequest: auth,
  }, async (request, reply) => {
    await endpointOf(request, request.params.id);
    const queued = UUID.test(request.params.delivery_id) && await requeueDelivery(services.pool, request.params.id, request.params.delivery_id, services.now());
    if (!queued) throw notFound('delivery not found');
    return reply.status(202).send({ delivery_id: request.params.delivery_id, webhook_id: queued.webhookId, status: 'queued' as const });
  });

  r.post(`${BASE}:id/recover/`, {
    config: { ...plain, idempotent: true },
    schema: {
      tags, operationId: 'recoverWebhookDeliveries', summary: 'Deliver again every delivery that failed (its retries exhausted) in [since, until): after an outage longer than the retry schedule',
      params: idParams, body: recoverBody,
      response: { 202: z.object({ requeued: z.number().int(), has_more: z.boolean() }), 400: errorSchema, 401: errorSchema, 404: errorSchema },
    },
    onRequest: auth,
  }, async (request, reply) => {
    const endpoint = await endpointOf(request, request.params.id);
    const now = services.now();
    const from = new Date(request.body.since);
    const to = request.body.until === undefined ? now : new Date(request.body.until);
    let requeued = 0;
    // short statements: a long transaction would hold back every reader of the event log
    for (;;) {
      const limit = Math.min(RECOVER_BATCH, RECOVER_MAX - requeued);
      const batch = await requeueFailedDeliveries(services.pool, endpoint.endpointId, from, to, now, limit);
      requeued += batch;
      if (batch < limit) return reply.status(202).send({ requeued, has_more: false });
      if (requeued === RECOVER_MAX) return reply.status(202).send({ requeued, has_more: true });
    }
  });

  r.post(`${BASE}:id/test/`, {
    config: { ...plain, idempotent: true },
    schema: { tags, operationId: 'sendWebhookTestEvent', summary: 'Queue a `webhook.test` event to this endpoint (whatever its event types)', params: idParams, response: { 202: queuedSchema, 401: errorSchema, 404: errorSchema } },
    onRequest: auth,
  }, async (request, reply) => {
    const endpoint = await endpointOf(request, request.params.id);
    const webhookId = webhookIdOf(randomUUID(), 'test');
    const now = services.now();
    const payload = webhookBody('webhook.test', now.toISOString(), { endpoint_id: endpoint.endpointId, message: 'test event from Switchboard' });
    const { queued: [deliveryId] } = await queueDeliveries(services.pool, [{ endpointId: endpoint.endpointId, companyId: endpoint.companyId, webhookId, eventType: 'webhook.test', payload }], now);
    // to a disabled endpoint: set aside, sent once it is enabled again
    if (deliveryId) await setAsideWhileDisabled(services.pool, endpoint.endpointId, deliveryId);
    return reply.status(202).send({ delivery_id: deliveryId ?? null, webhook_id: webhookId, status: 'queued' as const });
  });
}

