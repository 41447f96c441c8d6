import { ApiError } from './errors';

// Admission control of the qualitative export (docs/export.md, "Concurrent exports"): a page holds a database
// connection of the export pool for as long as its client reads, so pages beyond the pool's size are refused at
// once (429) instead of queueing, one API key cannot take every slot, and a page whose client stops reading is
// ended after a bound (EXPORT_MAX_STALL_MS).

export interface ExportLimits {
  /** pages streaming at once in this process (the export pool's size) */
  maxConcurrent: number;
  /** pages streaming at once per API key */
  maxPerKey: number;
  /** how long a page's client may read nothing before the page is ended (default EXPORT_MAX_STALL_MS) */
  maxStallMs?: number;
}

/** A taken slot. `release` gives it back; calling it again does nothing. */
export interface ExportSlot {
  release(): void;
}

export type ExportLimit = 'process' | 'key';

export type Admission = { admitted: true; slot: ExportSlot } | { admitted: false; limit: ExportLimit };

/** Seconds a refused client is told to wait (Retry-After). */
export const EXPORT_RETRY_AFTER_S = 5;

/**
 * A page whose HTTP connection has moved no byte for this long (its client stopped reading: asleep, gone without a
 * FIN, a stuck proxy) is ended: connection closed, transaction rolled back, slot and database connection given back.
 * It replaces the server's 30 s connection timeout for the export's responses (docs/export.md, "Slow clients").
 */
export const EXPORT_MAX_STALL_MS = 10 * 60_000;

export class ExportAdmission {
  private active = 0;
  private readonly perKey = new Map<string, number>();

  constructor(readonly limits: ExportLimits) {}

  /** Takes a slot for one page of `keyId`, or names the limit that refuses it. Never waits. */
  tryAdmit(keyId: string): Admission {
    if (this.active >= this.limits.maxConcurrent) return { admitted: false, limit: 'process' };
    const ofKey = this.perKey.get(keyId) ?? 0;
    if (ofKey >= this.limits.maxPerKey) return { admitted: false, limit: 'key' };
    this.active++;
    this.perKey.set(keyId, ofKey + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.active--;
      const left = this.perKey.get(keyId)! - 1;
      if (left === 0) this.perKey.delete(keyId);
      else this.perKey.set(keyId, left);
    };
    return { admitted: true, slot: { release } };
  }

  /** Pages streaming now, in all and for one key. */
  inUse(keyId?: string): number {
    return keyId === undefined ? this.active : (this.perKey.get(keyId) ?? 0);
  }
}

const pages = (n: number) => `${n} export ${n === 1 ? 'page' : 'pages'}`;

/** The 429 of a refused page, in the export's error shape (the route adds Retry-After). */
export function tooManyExports(limit: ExportLimit, limits: ExportLimits): ApiError {
  const which =
    limit === 'key'
      ? `this API key already has ${pages(limits.maxPerKey)} streaming, the most allowed per key`
      : `the service is already streaming ${pages(limits.maxConcurrent)}, the most it serves at once`;
  return new ApiError(429, `too many exports at once: ${which}; retry in ${EXPORT_RETRY_AFTER_S} seconds`, 'TOO_MANY_EXPORTS');
}
