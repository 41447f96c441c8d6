-- Outgoing client webhooks (docs/webhooks.md): the fan-out's checkpoint, one delivery per (webhook event, endpoint),
-- every attempt, and each endpoint's failure streak. Operational state, not a read model: never rebuilt.
CREATE SCHEMA IF NOT EXISTS webhooks;

CREATE TABLE IF NOT EXISTS webhooks.fanout_checkpoint (
  name text PRIMARY KEY,
  position text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS webhooks.deliveries (
  delivery_id uuid PRIMARY KEY,
  endpoint_id text NOT NULL,
  company_id integer NOT NULL,
  webhook_id text NOT NULL,            -- the webhook-id header: one per webhook event, the same on every retry
  event_type text NOT NULL,
  payload text NOT NULL,               -- the exact body signed and sent
  status text NOT NULL,                -- pending | succeeded | failed | dropped
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  created_at timestamptz NOT NULL,
  completed_at timestamptz,
  UNIQUE (endpoint_id, webhook_id)
);
CREATE INDEX IF NOT EXISTS deliveries_due ON webhooks.deliveries (next_attempt_at) WHERE status = 'pending';

CREATE TABLE IF NOT EXISTS webhooks.attempts (
  attempt_id bigserial PRIMARY KEY,
  delivery_id uuid NOT NULL,
  endpoint_id text NOT NULL,
  attempted_at timestamptz NOT NULL,
  status_code integer,
  latency_ms integer NOT NULL,
  error text,
  next_retry_at timestamptz
);
CREATE INDEX IF NOT EXISTS attempts_endpoint ON webhooks.attempts (endpoint_id, attempt_id DESC);

CREATE TABLE IF NOT EXISTS webhooks.endpoint_health (
  endpoint_id text PRIMARY KEY,
  failing_since timestamptz           -- first failed attempt since the last success; null when healthy
);
