import type { Pool } from 'pg';
import type { Projection } from '../projection';
import type { ApiKeyEvent } from '../../events/provisioning';

const SCHEMA = 'rm_apikeys';

/** Notified (payload: the key hash) in the transaction that changes a key, for the per-process auth caches. */
export const API_KEYS_CHANGED_CHANNEL = 'apikeys_changed';

export const apiKeysProjection: Projection = {
  name: 'apikeys',
  version: 1,
  schema: SCHEMA,
  handles: ['ApiKeyIssued', 'ApiKeyRevoked', 'ApiKeyExpiryChanged'],
  ddl: `
    CREATE TABLE IF NOT EXISTS keys (
      key_id     text PRIMARY KEY,
      key_hash   text NOT NULL UNIQUE,
      scope      text NOT NULL,
      company_id integer,
      user_id    integer,
      name       text NOT NULL,
      expires_at timestamptz,
      revoked    boolean NOT NULL DEFAULT false,
      issued_at  timestamptz NOT NULL
    );
    CREATE INDEX IF NOT EXISTS keys_company ON keys (company_id);`,
  async apply(tx, event) {
    const e = { type: event.type, data: event.data } as ApiKeyEvent;
    switch (e.type) {
      case 'ApiKeyIssued':
        await tx.query(
          `INSERT INTO keys (key_id, key_hash, scope, company_id, user_id, name, expires_at, issued_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (key_id) DO NOTHING`,
          [e.data.keyId, e.data.keyHash, e.data.scope, e.data.companyId, e.data.userId, e.data.name, e.data.expiresAt, event.metadata.at],
        );
        await tx.query('SELECT pg_notify($1, $2)', [API_KEYS_CHANGED_CHANNEL, e.data.keyHash]);
        return;
      case 'ApiKeyRevoked':
        await notifyChanged(tx, await tx.query('UPDATE keys SET revoked = true WHERE key_id = $1 RETURNING key_hash', [e.data.keyId]));
        return;
      case 'ApiKeyExpiryChanged':
        await notifyChanged(tx, await tx.query('UPDATE keys SET expires_at = $2 WHERE key_id = $1 RETURNING key_hash', [e.data.keyId, e.data.expiresAt]));
        return;
    }
  },
};

async function notifyChanged(tx: { query: (q: string, v: unknown[]) => Promise<unknown> }, updated: { rows: Array<{ key_hash: string }> }) {
  for (const r of updated.rows) await tx.query('SELECT pg_notify($1, $2)', [API_KEYS_CHANGED_CHANNEL, r.key_hash]);
}

export interface ApiKeyRecord {
  keyId: string;
  scope: 'company' | 'global';
  companyId: number | null;
  userId: number | null;
  name: string;
  expiresAt: Date | null;
  revoked: boolean;
  issuedAt: Date;
}

const toRecord = (r: any): ApiKeyRecord => ({
  keyId: r.key_id, scope: r.scope, companyId: r.company_id, userId: r.user_id, name: r.name,
  expiresAt: r.expires_at, revoked: r.revoked, issuedAt: r.issued_at,
});

export async function findApiKeyByHash(db: Pool, hash: string): Promise<ApiKeyRecord | undefined> {
  const r = await db.query(`SELECT * FROM ${SCHEMA}.keys WHERE key_hash = $1`, [hash]);
  return r.rows[0] ? toRecord(r.rows[0]) : undefined;
}

export async function listApiKeys(db: Pool, companyId?: number): Promise<ApiKeyRecord[]> {
  const r = companyId === undefined
    ? await db.query(`SELECT * FROM ${SCHEMA}.keys ORDER BY company_id NULLS FIRST, name`)
    : await db.query(`SELECT * FROM ${SCHEMA}.keys WHERE company_id = $1 ORDER BY name`, [companyId]);
  return r.rows.map(toRecord);
}
