import { randomBytes } from 'node:crypto';
import { type ApiKeyRecord, listApiKeys } from '../../projections/apikeys/projection';
import { companyExists, getCompanyUser } from '../../projections/business/queries';
import type { Services } from '../../services';
import { hashApiKey, keyIdFromHash } from '../../shared/api-key';
import { parseIsoInstant } from '../../shared/iso-instant';
import { isStorableInstant } from '../../shared/storable';
import { DomainError } from '../decider';
import { handleCommand } from '../handle';
import { awaitReadModels, readModelsUpToDate } from './read-models';
import { apiKeyDecider, apiKeyStreamId } from './api-key/decider';

// API key administration (`switchboard keys ...`): issue (the clear key is returned once and never stored),
// revoke, list (never a key or hash: ids, names, status).

/** A new key: `<prefix>_<secret>` or `<prefix>_global_<secret>`, secret = 32 random bytes as hex. */
export function generateApiKey(prefix: string, scope: 'company' | 'global'): string {
  const secret = randomBytes(32).toString('hex');
  return scope === 'global' ? `${prefix}_global_${secret}` : `${prefix}_${secret}`;
}

export interface IssueKeyInput {
  scope: 'company' | 'global';
  /** required for company keys, absent for global ones */
  companyId?: number;
  name: string;
  userId?: number;
  /** ISO 8601; absent = never expires */
  expiresAt?: string;
}

export interface IssuedKey {
  keyId: string;
  /** the clear key: show it once, it is not stored anywhere */
  key: string;
}

export async function issueApiKey(services: Services, input: IssueKeyInput, ctx: { actor: string }): Promise<IssuedKey> {
  const name = input.name.trim();
  if (!name) throw new DomainError('INVALID_KEY', 'a key needs a name');
  let expiresAt: string | null = null;
  if (input.expiresAt !== undefined) {
    // as the export reads an instant: a date or a date-time without a zone is UTC, never the process's own zone
    const at = parseIsoInstant(input.expiresAt, { zone: 'utc-if-missing' });
    if (at === undefined || !isStorableInstant(at)) throw new DomainError('INVALID_KEY', `--expires must be an ISO 8601 date-time, got ${JSON.stringify(input.expiresAt)}`);
    const t = at.getTime();
    if (t <= services.now().getTime()) throw new DomainError('INVALID_KEY', `--expires ${input.expiresAt} is not in the future`);
    expiresAt = new Date(t).toISOString();
  }
  await readModelsUpToDate(services, ['business']); // the company and its user
  if (input.scope === 'global') {
    if (input.companyId !== undefined || input.userId !== undefined) throw new DomainError('INVALID_KEY', 'a global key has no company and no user');
  } else {
    if (input.companyId === undefined) throw new DomainError('INVALID_KEY', 'a company key needs --company');
    if (!(await companyExists(services.pool, input.companyId))) throw new DomainError('UNKNOWN_COMPANY', `no company ${input.companyId}`);
    if (input.userId !== undefined && !(await getCompanyUser(services.pool, input.companyId, input.userId))) {
      throw new DomainError('UNKNOWN_USER', `company ${input.companyId} has no user ${input.userId}`);
    }
  }
  const key = generateApiKey(services.config.apiKeyPrefix, input.scope);
  const keyHash = hashApiKey(services.secrets.apiKeyPepper, key);
  const keyId = keyIdFromHash(keyHash);
  const companyId = input.scope === 'company' ? input.companyId! : null;
  const result = await handleCommand(services.store, apiKeyStreamId(keyId), apiKeyDecider, {
    type: 'ProvisionApiKey',
    data: { keyId, scope: input.scope, companyId, userId: input.userId ?? null, name, keyHash, expiresAt, active: true },
  }, { actor: ctx.actor, companyId, now: services.now });
  await awaitReadModels(services, result.position, result.events.map((e) => e.type));
  return { keyId, key };
}

/** Revokes a key by id; false when it was already revoked. Takes effect on the next request. */
export async function revokeApiKey(services: Services, keyId: string, ctx: { actor: string; reason?: string }): Promise<boolean> {
  const stream = apiKeyStreamId(keyId);
  const existing = await services.store.readStream(stream);
  const issued = existing.find((e) => e.type === 'ApiKeyIssued')?.data as { companyId: number | null } | undefined;
  const result = await handleCommand(services.store, stream, apiKeyDecider, {
    type: 'RevokeApiKey', data: ctx.reason === undefined ? { keyId } : { keyId, reason: ctx.reason },
  }, { actor: ctx.actor, companyId: issued?.companyId ?? null, now: services.now });
  await awaitReadModels(services, result.position, result.events.map((e) => e.type));
  return result.events.length > 0;
}

export interface KeyListing {
  keyId: string;
  scope: 'company' | 'global';
  companyId: number | null;
  userId: number | null;
  name: string;
  status: 'active' | 'revoked' | 'expired';
  expiresAt: string | null;
  issuedAt: string;
}

export async function listKeys(services: Services, companyId?: number): Promise<KeyListing[]> {
  await readModelsUpToDate(services, ['apikeys']);
  const now = services.now().getTime();
  const status = (k: ApiKeyRecord): KeyListing['status'] =>
    k.revoked ? 'revoked' : k.expiresAt && k.expiresAt.getTime() <= now ? 'expired' : 'active';
  return (await listApiKeys(services.pool, companyId)).map((k) => ({
    keyId: k.keyId, scope: k.scope, companyId: k.companyId, userId: k.userId, name: k.name, status: status(k),
    expiresAt: k.expiresAt ? k.expiresAt.toISOString() : null, issuedAt: new Date(k.issuedAt).toISOString(),
  }));
}
