import { createHmac } from 'node:crypto';

/** Keyed hash of a clear API key (HMAC-SHA256 with the pepper, hex). The clear key is never stored. */
export const hashApiKey = (pepper: string, key: string): string => createHmac('sha256', pepper).update(key).digest('hex');

/** Stable key id derived from the hash (seeding the same key twice yields the same id). */
export const keyIdFromHash = (hash: string): string => `key_${hash.slice(0, 20)}`;

export type KeyScope = 'company' | 'global';

/** `<prefix>_global_<secret>` is global, `<prefix>_<secret>` a company key; anything else is not a key of ours. */
export function scopeOfKey(prefix: string, key: string): KeyScope | undefined {
  if (key.startsWith(`${prefix}_global_`) && key.length > prefix.length + 8 + 8) return 'global';
  if (key.startsWith(`${prefix}_`) && key.length > prefix.length + 1 + 8 && !key.startsWith(`${prefix}_global_`)) return 'company';
  return undefined;
}
