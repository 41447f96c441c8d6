import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import type { Pool } from 'pg';
import type { ApiKeyRecord } from '../projections/apikeys/projection';
import { ApiKeyCache } from './api-key-cache';
import { ApiKeyHashes } from './api-key-hashes';
import { scopeOfKey } from '../shared/api-key';
import { ApiError, forbidden, unauthorized } from './errors';

/**
 * Who may call an endpoint (ARCHITECTURE section 9):
 *  - 'any':            company or global key (the export; company scoping is checked per requested company)
 *  - 'company':        a company key; a global key gets 403 (it has no company whose resources to show)
 *  - 'company-strict': an active company key only; a global key gets 401 (contacts get and upsert)
 */
export type AuthPolicy = 'any' | 'company' | 'company-strict';

export interface AuthenticatedKey extends ApiKeyRecord {}

/** An authenticated company key: companyId is set. */
export interface CompanyKey extends AuthenticatedKey {
  scope: 'company';
  companyId: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: AuthenticatedKey | null;
  }
  interface FastifyInstance {
    authenticate: (request: FastifyRequest, policy: AuthPolicy) => Promise<AuthenticatedKey>;
  }
}

export interface AuthDeps {
  pool: Pool;
  pepper: string;
  prefix: string;
  now: () => Date;
  /** subscribes to "API keys changed in this process" (the local projection runner), for exact invalidation */
  onKeysChanged?: (listener: () => void) => () => void;
}

/** Paths whose routes all need an API key (the API; not the ops endpoints, the docs or the provider's webhooks). */
const API_PATHS = '/api/';

export function registerAuth(app: FastifyInstance, deps: AuthDeps): void {
  const cache = new ApiKeyCache(deps.pool);
  const hashes = new ApiKeyHashes(deps.pepper);
  const unsubscribe = deps.onKeysChanged?.(() => cache.invalidateAll());
  app.addHook('onReady', () => cache.start());
  app.addHook('onClose', async () => {
    unsubscribe?.();
    await cache.stop();
  });
  app.decorateRequest('apiKey', null);
  // Every API route needs a key (spec, "Authentication"): the key is resolved first, on onRequest, so a request
  // without a valid one is 401 whatever its parameters and body (a route that authenticates on preHandler would
  // otherwise validate first and answer 400). The route's own `authenticate` applies its policy to this key.
  const identify = async (request: FastifyRequest) => {
    request.apiKey ??= await resolveKey(request, deps, cache, hashes);
  };
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.url.startsWith(API_PATHS)) return;
    route.onRequest = [identify, ...(route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest])];
  });
  app.decorate('authenticate', async (request: FastifyRequest, policy: AuthPolicy) => {
    const key = request.apiKey ?? (await resolveKey(request, deps, cache, hashes));
    if (key.scope === 'global') {
      if (policy === 'company-strict') throw unauthorized('a company API key is required for this endpoint');
      if (policy === 'company') throw forbidden('this API key has no access to company resources');
    }
    request.apiKey = key;
    return key;
  });
}

async function resolveKey(request: FastifyRequest, deps: AuthDeps, cache: ApiKeyCache, hashes: ApiKeyHashes): Promise<AuthenticatedKey> {
  const header = request.headers['x-api-key'];
  const clear = Array.isArray(header) ? header[0] : header;
  if (!clear || clear.trim() === '') throw unauthorized('API key required: send it in the X-API-Key header');
  const scope = scopeOfKey(deps.prefix, clear);
  if (!scope || clear.length > 512) throw unauthorized('invalid API key');
  const record = await hashes.find(clear, (hash) => cache.lookup(hash));
  if (!record || record.scope !== scope) throw unauthorized('invalid API key');
  if (record.revoked) throw unauthorized('API key revoked');
  if (record.expiresAt && record.expiresAt.getTime() <= deps.now().getTime()) throw unauthorized('API key expired');
  return record;
}

export function requireCompany(key: AuthenticatedKey): CompanyKey {
  if (key.scope !== 'company' || key.companyId === null) throw new ApiError(403, 'this API key has no access to company resources');
  return key as CompanyKey;
}
