// The `idempotency_keys` table (migrations 0005, 0010): one row per (company, key). docs/idempotency.md.
// An answer is kept sealed (state 'sealed', its body AES-256-GCM ciphertext): answers carry webhook signing secrets
// and contacts' personal data, which must not sit in plaintext in a side table. Rows in state 'completed' hold a
// plaintext body, written by versions before 2026-11-27; they are still replayed until they expire (24 h).
import type { Pool } from 'pg';
import { KEY_TTL_MS } from '../shared/idempotency-key';
import type { SealedBox } from '../shared/sealed-box';
import { passedByBothClocks } from '../shared/both-clocks';

export { KEY_TTL_MS };

export interface StoredAnswer {
  statusCode: number;
  contentType: string | null;
  body: string;
}

export type KeyRecord =
  | { state: 'in_flight'; fingerprint: string; leaseUntil: Date }
  | { state: 'completed'; fingerprint: string; answer: StoredAnswer };

/**
 * A request's hold on a key. `claimedAt` tells this claim from a later one of the same request that took the key
 * over after this one's lease lapsed (a stalled process): completing, releasing or renewing touches only its own.
 */
export interface KeyClaim {
  companyId: number;
  key: string;
  fingerprint: string;
  claimedAt: Date;
}

export type ClaimResult = { claimed: true; claim: KeyClaim } | { claimed: false; record: KeyRecord };

interface Row {
  state: 'in_flight' | 'completed' | 'sealed';
  fingerprint: string;
  lease_until: Date;
  status_code: number | null;
  content_type: string | null;
  body: string | null;
}

/**
 * Whether a time another process wrote (with its own clock) has passed, for this statement: by the claiming process's
 * clock ($5) and by Postgres's. A process whose clock runs ahead of the writer's can then not take over a lease (or a
 * key's 24 h) before it ends: what the Postgres clock says bounds it, as long as the writer's clock is not behind
 * Postgres's by more than the lease less its renewal period (10 s; docs/reliability.md, "Clocks of several processes").
 */
const LAPSED = (column: string) => passedByBothClocks(column, '$5');

export class IdempotencyStore {
  constructor(
    private readonly pool: Pool,
    /** seals and opens the answers' bodies */
    private readonly box: SealedBox,
  ) {}

  private toRecord(r: Row): KeyRecord {
    if (r.state === 'in_flight') return { state: 'in_flight', fingerprint: r.fingerprint, leaseUntil: r.lease_until };
    const body = r.body === null ? '' : r.state === 'sealed' ? this.box.open(r.body) : r.body;
    return { state: 'completed', fingerprint: r.fingerprint, answer: { statusCode: r.status_code!, contentType: r.content_type, body } };
  }

  /**
   * Claims the key for a request: a new key, an expired one (24 h), or an in-flight claim of the same request whose
   * lease has passed (its process died) becomes this request's. Otherwise the current record. Most keys are new:
   * a plain insert takes them (about half the work of the full claim, which runs only when the key exists).
   */
  async claim(companyId: number, key: string, fingerprint: string, now: Date, leaseMs: number): Promise<ClaimResult> {
    const leaseUntil = new Date(now.getTime() + leaseMs);
    const expiresAt = new Date(now.getTime() + KEY_TTL_MS);
    const fresh = await this.pool.query({
      name: 'idempotency_claim_new',
      text: `INSERT INTO public.idempotency_keys (company_id, key, fingerprint, state, lease_until, created_at, expires_at)
             VALUES ($1, $2, $3, 'in_flight', $4, $5, $6) ON CONFLICT (company_id, key) DO NOTHING`,
      values: [companyId, key, fingerprint, leaseUntil, now, expiresAt],
    });
    const claim: KeyClaim = { companyId, key, fingerprint, claimedAt: now };
    if (fresh.rowCount === 1) return { claimed: true, claim };
    const r = await this.pool.query<Row & { claimed: boolean }>({
      name: 'idempotency_claim',
      text: `WITH claim AS (
         INSERT INTO public.idempotency_keys AS k (company_id, key, fingerprint, state, lease_until, created_at, expires_at)
         VALUES ($1, $2, $3, 'in_flight', $4, $5, $6)
         ON CONFLICT (company_id, key) DO UPDATE
            SET fingerprint = EXCLUDED.fingerprint, state = 'in_flight', lease_until = EXCLUDED.lease_until,
                status_code = NULL, content_type = NULL, body = NULL, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
          WHERE ${LAPSED('k.expires_at')} OR (k.state = 'in_flight' AND ${LAPSED('k.lease_until')} AND k.fingerprint = EXCLUDED.fingerprint)
         RETURNING 1)
       SELECT true AS claimed, NULL::text AS state, NULL::text AS fingerprint, NULL::timestamptz AS lease_until,
              NULL::int AS status_code, NULL::text AS content_type, NULL::text AS body FROM claim
       UNION ALL
       SELECT false, state, fingerprint, lease_until, status_code, content_type, body
         FROM public.idempotency_keys WHERE company_id = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM claim)`,
      values: [companyId, key, fingerprint, leaseUntil, now, expiresAt],
    });
    const row = r.rows[0];
    if (!row) return this.claim(companyId, key, fingerprint, now, leaseMs); // released between the statement's two reads
    return row.claimed ? { claimed: true, claim } : { claimed: false, record: this.toRecord(row) };
  }

  async find(companyId: number, key: string): Promise<KeyRecord | undefined> {
    const r = await this.pool.query<Row>(
      'SELECT state, fingerprint, lease_until, status_code, content_type, body FROM public.idempotency_keys WHERE company_id = $1 AND key = $2',
      [companyId, key],
    );
    return r.rows[0] ? this.toRecord(r.rows[0]) : undefined;
  }

  /** Records the answer, sealed, of this claim (a claim taken over meanwhile is not overwritten). */
  async complete(claim: KeyClaim, answer: StoredAnswer): Promise<void> {
    await this.pool.query({
      name: 'idempotency_complete',
      text: `UPDATE public.idempotency_keys SET state = 'sealed', status_code = $5, content_type = $6, body = $7
              WHERE company_id = $1 AND key = $2 AND fingerprint = $3 AND created_at = $4 AND state = 'in_flight'`,
      values: [claim.companyId, claim.key, claim.fingerprint, claim.claimedAt, answer.statusCode, answer.contentType, this.box.seal(answer.body)],
    });
  }

  /** Forgets this in-flight claim (its answer was a 5xx, or there was none): the next request runs again. */
  async release(claim: KeyClaim): Promise<void> {
    await this.pool.query(
      `DELETE FROM public.idempotency_keys WHERE company_id = $1 AND key = $2 AND fingerprint = $3 AND created_at = $4 AND state = 'in_flight'`,
      [claim.companyId, claim.key, claim.fingerprint, claim.claimedAt],
    );
  }

  async renew(claim: KeyClaim, leaseUntil: Date): Promise<void> {
    await this.pool.query(
      `UPDATE public.idempotency_keys SET lease_until = $5 WHERE company_id = $1 AND key = $2 AND fingerprint = $3 AND created_at = $4 AND state = 'in_flight'`,
      [claim.companyId, claim.key, claim.fingerprint, claim.claimedAt, leaseUntil],
    );
  }

  /**
   * Deletes the expired records, `batch` per statement, until a statement finds fewer or `maxBatches` ran (or
   * `stopping` says so); returns how many. One batch a run capped the purge at 1.44 million keys a day a process
   * (review 19, docs/growth.md); a run now takes up to a million, in short statements.
   */
  async purgeAllExpired(now: Date, options: { batch?: number; maxBatches?: number; stopping?: () => boolean } = {}): Promise<number> {
    const batch = options.batch ?? 10_000;
    let purged = 0;
    for (let i = 0; i < (options.maxBatches ?? 100) && !options.stopping?.(); i++) {
      const n = await this.purgeExpired(now, batch);
      purged += n;
      if (n < batch) break;
    }
    return purged;
  }

  /** Deletes up to `limit` expired records; returns how many. */
  async purgeExpired(now: Date, limit = 10_000): Promise<number> {
    const r = await this.pool.query(
      `DELETE FROM public.idempotency_keys WHERE ctid = ANY(ARRAY(
         SELECT ctid FROM public.idempotency_keys WHERE ${passedByBothClocks('expires_at', '$1')} LIMIT $2))`,
      [now, limit],
    );
    return r.rowCount ?? 0;
  }
}
