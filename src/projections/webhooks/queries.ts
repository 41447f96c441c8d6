import type { Pool, PoolClient } from 'pg';
import { WEBHOOKS_SCHEMA } from './projection';

type Db = Pool | PoolClient;
const S = WEBHOOKS_SCHEMA;

export interface WebhookEndpointRow {
  endpointId: string;
  companyId: number;
  url: string;
  eventTypes: string[];
  description: string | null;
  enabled: boolean;
  disabledReason: string | null;
  /** sealed */
  secret: string;
  /** sealed; signs alongside `secret` until previousValidUntil */
  previousSecret: string | null;
  previousValidUntil: Date | null;
  /** sealed; secrets rotated out before `previousSecret`, each signing until its validUntil (newest first) */
  olderSecrets: Array<{ secret: string; validUntil: string }>;
  createdAt: Date;
  updatedAt: Date;
  createdPosition: string;
}

const COLUMNS = `endpoint_id, company_id, url, event_types, description, enabled, disabled_reason, secret, previous_secret,
  previous_valid_until, older_secrets, created_at, updated_at, created_position`;

const toRow = (r: any): WebhookEndpointRow => ({
  endpointId: r.endpoint_id, companyId: r.company_id, url: r.url, eventTypes: r.event_types, description: r.description,
  enabled: r.enabled, disabledReason: r.disabled_reason, secret: r.secret, previousSecret: r.previous_secret,
  previousValidUntil: r.previous_valid_until, olderSecrets: r.older_secrets, createdAt: r.created_at, updatedAt: r.updated_at, createdPosition: r.created_position,
});

/** The sealed secrets that sign a webhook sent at `at`: the current one, then those rotated out still in their 24 h. */
export function signingSecrets(ep: WebhookEndpointRow, at: Date): string[] {
  const secrets = [ep.secret];
  if (ep.previousSecret && ep.previousValidUntil && ep.previousValidUntil > at) secrets.push(ep.previousSecret);
  for (const older of ep.olderSecrets) if (Date.parse(older.validUntil) > at.getTime()) secrets.push(older.secret);
  return secrets;
}

export async function listWebhookEndpoints(db: Db, companyId: number): Promise<WebhookEndpointRow[]> {
  const { rows } = await db.query(`SELECT ${COLUMNS} FROM ${S}.endpoints WHERE company_id = $1 ORDER BY created_at, endpoint_id`, [companyId]);
  return rows.map(toRow);
}

/** How many endpoints the company has (enabled or not). */
export async function countWebhookEndpoints(db: Db, companyId: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${S}.endpoints WHERE company_id = $1`, [companyId]);
  return rows[0].n;
}

export async function findWebhookEndpoint(db: Db, companyId: number, endpointId: string): Promise<WebhookEndpointRow | undefined> {
  const { rows } = await db.query(`SELECT ${COLUMNS} FROM ${S}.endpoints WHERE company_id = $1 AND endpoint_id = $2`, [companyId, endpointId]);
  return rows[0] ? toRow(rows[0]) : undefined;
}

/** Enabled endpoints of these companies (the fan-out's subscribers). */
export async function enabledEndpointsOf(db: Db, companyIds: readonly number[]): Promise<WebhookEndpointRow[]> {
  const { rows } = await db.query(`SELECT ${COLUMNS} FROM ${S}.endpoints WHERE enabled AND company_id = ANY($1::int[])`, [companyIds]);
  return rows.map(toRow);
}

const QUALIFIED_COLUMNS = COLUMNS.split(',').map((c) => `e.${c.trim()}`).join(', ');

/** The sender's view of endpoints: with the start of their failure streak (null when healthy). */
export type SendingEndpoint = WebhookEndpointRow & { failingSince: Date | null };

export async function endpointsById(db: Db, endpointIds: readonly string[]): Promise<Map<string, SendingEndpoint>> {
  const { rows } = await db.query(
    `SELECT ${QUALIFIED_COLUMNS}, h.failing_since
       FROM ${S}.endpoints e LEFT JOIN webhooks.endpoint_health h ON h.endpoint_id = e.endpoint_id
      WHERE e.endpoint_id = ANY($1::text[])`,
    [endpointIds],
  );
  return new Map(rows.map((r) => [r.endpoint_id, { ...toRow(r), failingSince: r.failing_since }]));
}
