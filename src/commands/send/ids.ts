import { createHash } from 'node:crypto';

/**
 * A deterministic UUID (RFC 4122 layout, version 5 bits, SHA-256 based) for a name within a namespace: the same
 * external input (a provider notification, a send's outbound message) always yields the same event id, so
 * the event store recognises a re-append instead of storing a duplicate.
 */
export function deterministicUuid(namespace: string, name: string): string {
  const h = createHash('sha256').update(`switchboard/${namespace}\u0000`).update(name, 'utf8').digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const hex = h.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
