import type { FastifyInstance, FastifyRequest } from 'fastify';
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
  app.decorate('authenticate', async (request: FastifyRequest, policy: AuthPolicy) => {
    const key = await resolveKey(request, deps, cache, hashes);
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
