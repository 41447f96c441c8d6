import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AmbiguousPhoneError, upsertContact, type UpsertResult } from '../../commands/contact/handler';
import { type CustomFieldView, customFieldViews } from '../../commands/contact/model';
import { parseUpsertBody } from '../../commands/contact/upsert-input';
import { CONTACT_SOURCES, type ContactSource } from '../../events/contacts';
import { FIELD_TYPES } from '../../events/provisioning';
import { type ExternalContactRow, findExternalContacts, type LookupResult, lookupContact } from '../../projections/contacts/queries';
import type { Services } from '../../services';
import { normalizePhone } from '../../shared/phone';
import { requireCompany } from '../auth';
import { type ContactView, contactCacheOf } from '../contact-cache';
import { badRequest, conflict, throwUnlessOnlyMissing } from '../errors';

// Contacts (spec: contact-lookup, external contacts get, upsert). Decisions: docs/contacts.md.

const SESSION_WINDOW_MS = 24 * 60 * 60 * 1000;
const LOOKUP_SOURCES = CONTACT_SOURCES.filter((s) => s !== 'directory_contacts');

const errorBody = z.object({ error: z.string() });

const customField = z.object({
  id: z.number().int(),
  key: z.string(),
  name: z.string(),
  field_type: z.enum(FIELD_TYPES),
  options: z.array(z.string()).nullable(),
  required: z.boolean(),
  value: z.array(z.union([z.string(), z.number()])).nullable().describe('active value; null if none yet, cleared or expired'),
  version: z.number().int().nullable().describe('latest version (1, 2, ...); null if never set'),
  expires_at: z.string().nullable(),
});

const lookupContactView = z.object({
  id: z.number().int(),
  fullName: z.string().nullable(),
  phone: z.string().describe('E.164'),
  email: z.string().nullable(),
  contactListId: z.number().int(),
  contactListName: z.string(),
  source: z.enum(LOOKUP_SOURCES as [string, ...string[]]).nullable(),
  createdAt: z.string(),
});

const lookupResponse = z.object({
  found: z.boolean().describe("a contact with this number exists in any list of the key's company"),
  contact: lookupContactView.nullable(),
  hasReplied: z.boolean(),
  lastReplyAt: z.string().nullable(),
  sessionWindowActive: z.boolean(),
  sessionExpiresAt: z.string().nullable(),
});

const getContactView = z.object({
  id: z.number().int(),
  full_name: z.string().nullable(),
  email: z.string().nullable(),
  phone: z.string(),
  source: z.enum(CONTACT_SOURCES).nullable(),
  source_detail: z.string().nullable(),
  profile_picture: z.string().nullable(),
  custom_fields: z.array(customField),
});

const getResponse = z.object({ found: z.boolean(), contact: getContactView.nullable() });

const upsertContactView = z.object({
  id: z.number().int(),
  fullName: z.string().nullable(),
  email: z.string().nullable(),
  phone: z.string().describe('E.164'),
  source: z.enum(CONTACT_SOURCES).nullable(),
  sourceDetail: z.string().nullable(),
  contactListId: z.number().int(),
  profilePicture: z.string().nullable(),
  customFields: z.array(customField),
});

const upsertResponse = z.object({
  created: z.boolean(),
  contact: upsertContactView,
  versionedCustomFields: z.array(z.object({ customFieldId: z.number().int(), key: z.string(), version: z.number().int() })),
});

const customFieldItem = z
  .object({
    custom_field_id: z.number().int().optional().describe('exactly one of custom_field_id and key'),
    key: z.string().optional(),
    value: z.array(z.union([z.string(), z.number()])).describe('one element; several only for multiselector; [] = no value'),
    expires_at: z.string().nullable().optional().describe('ISO 8601 with a zone; null removes the expiry; omitted keeps it'),
  })
  .describe('keys are snake_case only (customFieldId is rejected)');

/** Documentation of the body; the body is parsed by parseUpsertBody (both casings, every problem named). */
const upsertBodyDoc = z
  .object({
    phone: z.string().describe('normalized to E.164; not editable'),
    contact_list_id: z.number().int().optional().describe('create only; default: the default list. Also contactListId'),
    full_name: z.string().nullable().optional().describe('also fullName'),
    email: z.string().nullable().optional().describe('"" clears it'),
    source: z.enum(CONTACT_SOURCES).optional().describe('default api'),
    source_detail: z.string().nullable().optional().describe('also sourceDetail'),
    profile_picture: z.string().nullable().optional().describe('http(s) URL; also profilePicture'),
    custom_fields: z.array(customFieldItem).optional().describe('also customFields'),
  })
  .loose();

// `phone` is required (documented so); a missing or blank one is the route's own 400 `phone is required`
const phoneQuery = z.object({
  phone: z.string().describe('E.164 with or without +, Argentine 9/15 variants, spaces and dashes'),
});

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
const lookupSource = (s: ContactSource | null): ContactSource | null => (s === 'directory_contacts' ? 'other' : s);

function requirePhone(request: FastifyRequest): string {
  throwUnlessOnlyMissing(request, phoneQuery);
  const raw = (request.query as { phone?: string }).phone;
  if (raw === undefined || raw.trim() === '') throw badRequest('phone is required');
  return raw;
}

/** Sends JSON serialized beforehand (a string payload skips the response serializer). */
function sendJson(reply: FastifyReply, json: string): FastifyReply {
  return reply.header('content-type', 'application/json; charset=utf-8').send(json as never);
}

const constant = (json: string): ContactView => ({ render: () => json });
const LOOKUP_NOT_FOUND = constant(JSON.stringify(lookupResponse.parse({
  found: false, contact: null, hasReplied: false, lastReplyAt: null, sessionWindowActive: false, sessionExpiresAt: null,
})));
const GET_NOT_FOUND = constant(JSON.stringify(getResponse.parse({ found: false, contact: null })));

/**
 * The lookup's body as a function of the time: both bodies (session window open and closed) serialized once, through
 * the response schema, as the serializer would.
 */
export function lookupView({ contact, lastReplyAt }: LookupResult): ContactView {
  if (!contact) return LOOKUP_NOT_FOUND;
  const expires = lastReplyAt ? new Date(lastReplyAt.getTime() + SESSION_WINDOW_MS) : null;
  const body = (sessionWindowActive: boolean) => JSON.stringify(lookupResponse.parse({
    found: true,
    contact: {
      id: contact.id,
      fullName: contact.fullName,
      phone: contact.phone,
      email: contact.email,
      contactListId: contact.contactListId,
      contactListName: contact.contactListName,
      source: lookupSource(contact.source),
      createdAt: contact.createdAt.toISOString(),
    },
    hasReplied: lastReplyAt !== null,
    lastReplyAt: iso(lastReplyAt),
    sessionWindowActive,
    sessionExpiresAt: iso(expires),
  }));
  if (!expires) return constant(body(false));
  const open = body(true);
  const closed = body(false);
  const until = expires.getTime();
  return { render: (now) => (now < until ? open : closed) };
}

/**
 * The external get's body as a function of the time: it changes only when an active custom-field value expires, so
 * the body serialized for one time is reused until the next expiry (or for times before the previous one).
 */
export function externalView(rows: ExternalContactRow[], e164: string): ContactView {
  if (rows.length > 1) {
    const message = `more than one contact of this company has the number ${e164}`;
    return { render: () => { throw conflict(message); } };
  }
  const c = rows[0];
  if (!c) return GET_NOT_FOUND;
  const expiries = [...c.values.values()].flatMap((v) => (v.value !== null && v.expiresAt !== null ? [Date.parse(v.expiresAt)] : []));
  const render = (now: number) => JSON.stringify(getResponse.parse({
    found: true,
    contact: {
      id: c.id,
      full_name: c.fullName,
      email: c.email,
      phone: c.phone,
      source: c.source,
      source_detail: c.sourceDetail,
      profile_picture: c.profilePicture,
      custom_fields: customFieldViews(c.fields, c.values, new Date(now)),
    },
  }));
  if (expiries.length === 0) return constant(render(0));
  // a value is active while now < expiresAt: the body is the same for every time in [from, until)
  let memo: { json: string; from: number; until: number } | undefined;
  return {
    render(now) {
      if (!memo || now < memo.from || now >= memo.until) {
        const from = Math.max(-Infinity, ...expiries.filter((e) => e <= now));
        const until = Math.min(Infinity, ...expiries.filter((e) => e > now));
        memo = { json: render(now), from, until };
      }
      return memo.json;
    },
  };
}

export function upsertView(result: UpsertResult, now: Date) {
  const c = result.contact;
  return {
    created: result.created,
    contact: {
      id: c.contactId,
      fullName: c.profile.fullName,
      email: c.profile.email,
      phone: c.phone,
      source: c.profile.source,
      sourceDetail: c.profile.sourceDetail,
      contactListId: c.contactListId,
      profilePicture: c.profile.profilePicture,
      customFields: customFieldViews(result.list.fields, c.fields, now) as CustomFieldView[],
    },
    versionedCustomFields: result.versionedCustomFields,
  };
}

export function registerContactRoutes(fastify: FastifyInstance, services: Services): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const config = { errorShape: 'plain' as const };
  // Authentication on onRequest, before validation: an unauthenticated caller gets 401, never a 400.
  const companyKey = async (request: FastifyRequest) => {
    await app.authenticate(request, 'company');
  };
  const strictCompanyKey = async (request: FastifyRequest) => {
    await app.authenticate(request, 'company-strict');
  };
  const companyOf = (request: FastifyRequest) => requireCompany(request.apiKey!).companyId;
  // Lookups and gets by number are served from a per-process cache invalidated by the contacts read model; the
  // same cache remembers each number's last upsert for the next one (UpsertMemory).
  const cache = contactCacheOf(fastify, services.pool);
  const upsertDeps = { store: services.store, pool: services.pool, runner: services.runner, now: services.now, memory: cache.upserts };

  app.get('/api/v1/contact-lookup/', {
    config,
    onRequest: companyKey,
    attachValidation: true,
    schema: {
      tags: ['contacts'],
      operationId: 'lookUpContact', summary: "Look up a contact of the key's company by phone, with reply and session-window information",
      querystring: phoneQuery,
      response: { 200: lookupResponse, 400: errorBody, 401: errorBody, 403: errorBody },
    },
  }, async (request, reply) => {
    const e164 = normalizePhone(requirePhone(request));
    if (!e164) return sendJson(reply, LOOKUP_NOT_FOUND.render(0));
    const companyId = companyOf(request);
    const view = await cache.get('lookup', companyId, e164, async () => lookupView(await lookupContact(services.pool, companyId, e164)));
    return sendJson(reply, view.render(services.now().getTime()));
  });

  app.get('/api/v1/external/contacts/', {
    config,
    onRequest: strictCompanyKey,
    attachValidation: true,
    schema: {
      tags: ['contacts'],
      operationId: 'getContact', summary: "Get a (non-test) contact of the key's company by phone, with every custom field of its list",
      querystring: phoneQuery,
      response: { 200: getResponse, 400: errorBody, 401: errorBody, 409: errorBody },
    },
  }, async (request, reply) => {
    const e164 = normalizePhone(requirePhone(request));
    if (!e164) return sendJson(reply, GET_NOT_FOUND.render(0));
    const companyId = companyOf(request);
    const view = await cache.get('external', companyId, e164, async () => externalView(await findExternalContacts(services.pool, companyId, e164, 2), e164));
    return sendJson(reply, view.render(services.now().getTime()));
  });

  app.post('/api/v1/external/contacts/upsert/', {
    config: { ...config, idempotent: true },
    onRequest: strictCompanyKey,
    schema: {
      tags: ['contacts'],
      operationId: 'upsertContact', summary: "Create (201) or update (200) a contact of the key's company, identified by phone, with versioned custom fields",
      body: upsertBodyDoc.describe('top-level keys in snake_case or camelCase'),
      response: { 200: upsertResponse, 201: upsertResponse, 400: errorBody, 401: errorBody, 409: errorBody },
    },
    // the body is validated by parseUpsertBody (both casings, protected fields, every problem named at once)
    validatorCompiler: () => (data: unknown) => ({ value: data }),
  }, async (request, reply) => {
    const key = requireCompany(request.apiKey!);
    const input = parseUpsertBody(request.body);
    let result: UpsertResult;
    try {
      result = await upsertContact(upsertDeps, key.companyId, input, { actor: key.keyId, companyId: key.companyId });
    } catch (err) {
      if (err instanceof AmbiguousPhoneError) throw conflict(err.message);
      throw err;
    }
    if (result.events.length > 0) cache.changed(key.companyId, result.contact.phone);
    return reply.status(result.created ? 201 : 200).send(upsertView(result, services.now()));
  });
}
