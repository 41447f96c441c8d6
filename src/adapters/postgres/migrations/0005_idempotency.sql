-- Idempotency-Key records (src/http/idempotency.ts, docs/idempotency.md): one row per (company, key), claimed
-- in_flight by the first request (with a lease its process renews), then completed with the answer to replay.
CREATE TABLE IF NOT EXISTS public.idempotency_keys (
  company_id integer NOT NULL,
  key text NOT NULL,
  fingerprint text NOT NULL,        -- sha256 of method, route, path parameters and canonical JSON body
  state text NOT NULL CHECK (state IN ('in_flight', 'completed')),
  lease_until timestamptz NOT NULL, -- an in_flight claim past its lease may be taken over (its process died)
  status_code integer,
  content_type text,
  body text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,  -- created_at + 24 h: forgotten after it
  PRIMARY KEY (company_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_expires_at ON public.idempotency_keys (expires_at);
