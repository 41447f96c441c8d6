-- Provider statuses the delivery consumer parked (docs/sends.md, "Delivery consumer"; src/workers/parked-statuses.ts):
-- a status whose provider message id has no known owner after the short in-place wait is written here, and its
-- Kafka offset then moves on (the record is in Postgres before the commit), so it never holds back the later
-- records of its partition. A later status of a provider id with parked statuses is parked after them (they are
-- applied in `seq` order). The parked-status sweeper applies them once the owner is known, or dead-letters them
-- `ownerGraceMs` after `first_seen`, and deletes them. Keyed by the status's identity (provider id, status, the
-- provider's timestamp: what its event ids derive from), so a redelivered record parks once and keeps its first
-- `first_seen`. Outside the read models' schemas: a projection rebuild never touches it.
CREATE TABLE IF NOT EXISTS public.parked_provider_statuses (
  provider_message_id text NOT NULL,
  status text NOT NULL,
  status_timestamp text NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  first_seen timestamptz NOT NULL DEFAULT now(),
  -- the record as the consumer got it ({topic, key, value, headers, partition, offset}), JSON text: what is applied
  -- later, or dead-lettered (text, not jsonb: jsonb refuses some escapes a record may hold, e.g. \u0000)
  record text NOT NULL,
  PRIMARY KEY (provider_message_id, status, status_timestamp)
);
CREATE INDEX IF NOT EXISTS parked_provider_statuses_seq ON public.parked_provider_statuses (seq);
