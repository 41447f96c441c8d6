import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

// The export's paging cursor (docs/export.md): opaque and tamper-evident. It carries the keyset position of
// the last row sent and the snapshot bound of the export (the highest ingestion `seq` of its first page), and
// it is bound to the query's filters. It contains real ids, so it is encrypted, not only signed:
// AES-256-GCM with a key derived from ANONYMIZATION_SECRET (HMAC-SHA256(secret, purpose)), the hash of the
// filters as associated data. Any change to the token, or use with other filters, fails authentication.

export interface ExportFilters {
  /** sorted, distinct */
  companyIds: number[];
  from: Date;
  to: Date;
  /** null = every channel */
  channels: string[] | null;
  /** null = both */
  direction: 'inbound' | 'outbound' | null;
  /** sorted, distinct; null = any author */
  agentIds: number[] | null;
}

/** Position of a row in export order (occurred_at, company_id, message_id). */
export interface ExportKeyset {
  /** occurred_at as Postgres prints it in UTC (microsecond precision kept) */
  occurredAt: string;
  companyId: number;
  messageId: string;
}

export interface CursorState {
  /** rows with seq <= hw belong to this export (the snapshot bound of its first page) */
  hw: string;
  after: ExportKeyset;
}

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const MAX_CURSOR_LENGTH = 4096;

/** A canonical digest of the filters a cursor is bound to (limit and include are free to change). */
export function filtersDigest(f: ExportFilters): Buffer {
  const canonical = JSON.stringify([
    VERSION,
    f.companyIds,
    f.from.toISOString(),
    f.to.toISOString(),
    f.channels ? [...f.channels].sort() : null,
    f.direction,
    f.agentIds,
  ]);
  return createHash('sha256').update(canonical).digest();
}

export class ExportCursorCodec {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = createHmac('sha256', secret).update('switchboard/export-cursor/v1').digest();
  }

  encode(state: CursorState, filters: ExportFilters): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(filtersDigest(filters));
    const payload = JSON.stringify([VERSION, state.hw, state.after.occurredAt, state.after.companyId, state.after.messageId]);
    const body = Buffer.concat([cipher.update(payload, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** The cursor's state, or undefined when it is malformed, tampered with or bound to other filters. */
  decode(token: string, filters: ExportFilters): CursorState | undefined {
    if (token.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
    const raw = Buffer.from(token, 'base64url');
    if (raw.length <= IV_BYTES + TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
      decipher.setAAD(filtersDigest(filters));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      const text = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      const v = JSON.parse(text) as unknown;
      if (!Array.isArray(v) || v.length !== 5 || v[0] !== VERSION) return undefined;
      const [, hw, occurredAt, companyId, messageId] = v as [number, unknown, unknown, unknown, unknown];
      if (typeof hw !== 'string' || !/^\d+$/.test(hw)) return undefined;
      if (typeof occurredAt !== 'string' || typeof companyId !== 'number' || typeof messageId !== 'string') return undefined;
      return { hw, after: { occurredAt, companyId, messageId } };
    } catch {
      return undefined;
    }
  }
}
