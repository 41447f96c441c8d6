import type { Projection } from '../projection';
import type { PoolClient } from 'pg';
import { WEBHOOK_ENDPOINT_EVENT_TYPES, type WebhookEndpointEvent } from '../../events/webhooks';
import { WEBHOOK_ENDPOINTS_CHANGED_CHANNEL } from '../change-signals';

// Clients' webhook endpoints (docs/webhooks.md). Secrets stay sealed (ciphertext) here as in the events.
// `created_position`: the fan-out gives an endpoint only events logged after it was created.

export const WEBHOOKS_SCHEMA = 'rm_webhooks';

/**
 * Secrets rotated out before the previous one that still sign (their 24 h not over): with the current and the
 * previous, at most five signatures per webhook; a fifth rotation within 24 h ends the oldest's grace early.
 */
export const OLDER_SECRETS_KEPT = 3;

export const webhooksProjection: Projection = {
  name: 'webhooks',
  // older_secrets (2026-11-27) is added to the live table by migration 0012, not by a version bump (its rebuild
  // would leave the live table without the column until the swap)
  version: 1,
  schema: WEBHOOKS_SCHEMA,
  handles: WEBHOOK_ENDPOINT_EVENT_TYPES,
  ddl: `
    CREATE TABLE IF NOT EXISTS endpoints (
      endpoint_id      text PRIMARY KEY,
      company_id       integer NOT NULL,
      url              text NOT NULL,
      event_types      text[] NOT NULL,
      description      text,
      enabled          boolean NOT NULL,
      disabled_reason  text,
      secret           text NOT NULL,
      previous_secret  text,
      previous_valid_until timestamptz,
      -- secrets rotated out before previous_secret and still signing: [{secret, validUntil}], newest first
      older_secrets    jsonb NOT NULL DEFAULT '[]',
      created_at       timestamptz NOT NULL,
      updated_at       timestamptz NOT NULL,
      created_position text NOT NULL
    );
    CREATE INDEX IF NOT EXISTS endpoints_company ON endpoints (company_id, created_at);`,
  async apply(tx, event) {
    const e = { type: event.type, data: event.data } as WebhookEndpointEvent;
    const at = event.metadata.at;
    switch (e.type) {
      case 'WebhookEndpointCreated':
        await tx.query(
          `INSERT INTO endpoints (endpoint_id, company_id, url, event_types, description, enabled, secret, created_at, updated_at, created_position)
           VALUES ($1, $2, $3, $4, $5, true, $6, $7, $7, $8) ON CONFLICT (endpoint_id) DO NOTHING`,
          [e.data.endpointId, e.data.companyId, e.data.url, e.data.eventTypes, e.data.description, e.data.secret, e.data.createdAt, event.position],
        );
        return;
      case 'WebhookEndpointChanged':
        await tx.query('UPDATE endpoints SET url = $2, event_types = $3, description = $4, updated_at = $5 WHERE endpoint_id = $1',
          [e.data.endpointId, e.data.url, e.data.eventTypes, e.data.description, at]);
        await signalEndpointChanged(tx, e.data.endpointId);
        return;
      case 'WebhookEndpointDisabled':
        await tx.query('UPDATE endpoints SET enabled = false, disabled_reason = $2, updated_at = $3 WHERE endpoint_id = $1', [e.data.endpointId, e.data.reason, at]);
        await signalEndpointChanged(tx, e.data.endpointId);
        return;
      case 'WebhookEndpointEnabled':
        await tx.query('UPDATE endpoints SET enabled = true, disabled_reason = NULL, updated_at = $2 WHERE endpoint_id = $1', [e.data.endpointId, at]);
        return;
      case 'WebhookEndpointSecretRotated':
        // idempotent: a redelivered rotation finds its secret current already. The previous secret joins the older
        // ones that still sign at the rotation's time, at most OLDER_SECRETS_KEPT.
        await tx.query(
          `UPDATE endpoints SET
             older_secrets = (SELECT COALESCE(jsonb_agg(o.s ORDER BY (o.s->>'validUntil')::timestamptz DESC), '[]')
                FROM (SELECT s FROM jsonb_array_elements(older_secrets || CASE WHEN previous_secret IS NULL THEN '[]'::jsonb
                        ELSE jsonb_build_array(jsonb_build_object('secret', previous_secret, 'validUntil', previous_valid_until)) END) s
                       WHERE (s->>'validUntil')::timestamptz > $4::timestamptz
                       ORDER BY (s->>'validUntil')::timestamptz DESC LIMIT $5) o),
             previous_secret = secret, secret = $2, previous_valid_until = $3, updated_at = $4
            WHERE endpoint_id = $1 AND secret <> $2`,
          [e.data.endpointId, e.data.secret, e.data.previousSecretValidUntil, at, OLDER_SECRETS_KEPT],
        );
        await signalEndpointChanged(tx, e.data.endpointId); // what waits in a lane was signed for the secrets before
        return;
      case 'WebhookEndpointDeleted':
        await tx.query('DELETE FROM endpoints WHERE endpoint_id = $1', [e.data.endpointId]);
        await signalEndpointChanged(tx, e.data.endpointId);
        return;
    }
  },
};

/** Tells every webhook sender, once this transaction commits, that the endpoint's deliveries in hand are stale. */
const signalEndpointChanged = (tx: PoolClient, endpointId: string) =>
  tx.query('SELECT pg_notify($1, $2)', [WEBHOOK_ENDPOINTS_CHANGED_CHANNEL, endpointId]);
