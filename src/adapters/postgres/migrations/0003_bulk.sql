-- Work state of the bulk-send dispatcher (docs/bulk.md). Command-side state, not a read model: it is never
-- rebuilt from the log, so it lives outside the projection schemas (a projection rebuild would drop it).
-- The events stay the source of truth for what happened: every outcome written here is also appended as an
-- event. Outcomes are written together with an outcome batch (same statement); the batch is appended as one
-- event (id derived from the batch) and then deleted, so a crash in between leaves the batch to append again.
CREATE SCHEMA IF NOT EXISTS bulk_work;

-- One row per bulk send. state: draft (creation not committed yet) | queued | processing | finished | cancelled.
CREATE TABLE bulk_work.jobs (
  bulk_id             uuid        PRIMARY KEY,
  task_id             text        NOT NULL,
  company_id          integer     NOT NULL,
  number_id           integer     NOT NULL,
  phone_number_id     text        NOT NULL,
  template_name       text        NOT NULL,
  language            text        NOT NULL,
  template            jsonb       NOT NULL,
  chunk_count         integer     NOT NULL,
  recipient_count     integer     NOT NULL,
  materialized_chunks integer     NOT NULL DEFAULT 0,
  state               text        NOT NULL,
  cancel_requested    boolean     NOT NULL DEFAULT false,
  paused              boolean     NOT NULL DEFAULT false,
  paused_until        timestamptz,
  heartbeat_at        timestamptz,
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL
);
CREATE INDEX jobs_active ON bulk_work.jobs (number_id, created_at) WHERE state IN ('queued', 'processing');

-- One row per deduplicated recipient, copied from the chunk streams when the dispatcher gets to it.
-- state: pending -> in_flight (durably marked, with dispatcher and lease, before the provider is called)
--        -> sent | failed; a retryable provider error puts it back to pending with next_attempt_at.
CREATE TABLE bulk_work.recipients (
  bulk_id             uuid        NOT NULL,
  idx                 integer     NOT NULL,
  chunk               integer     NOT NULL,
  number_id           integer     NOT NULL,
  phone               text        NOT NULL,
  e164                text        NOT NULL,
  variables           jsonb       NOT NULL,
  button_variables    jsonb       NOT NULL,
  state               text        NOT NULL DEFAULT 'pending',
  attempts            integer     NOT NULL DEFAULT 0,
  next_attempt_at     timestamptz,
  dispatcher          text,
  lease_until         timestamptz,
  claimed_at          timestamptz,
  provider_message_id text,
  error_code          text,
  error_message       text,
  interrupted         boolean     NOT NULL DEFAULT false,
  outcome_at          timestamptz,
  PRIMARY KEY (bulk_id, idx)
);
CREATE INDEX recipients_pending ON bulk_work.recipients (bulk_id, idx) WHERE state = 'pending';
CREATE INDEX recipients_in_flight ON bulk_work.recipients (lease_until) WHERE state = 'in_flight';
CREATE INDEX recipients_window ON bulk_work.recipients (number_id, e164, claimed_at) WHERE state IN ('in_flight', 'sent');
CREATE INDEX recipients_provider_id ON bulk_work.recipients (provider_message_id) WHERE provider_message_id IS NOT NULL;

-- Outcomes whose event is not appended yet: one row per (window, chunk, kind), deleted once appended.
CREATE TABLE bulk_work.outcome_batches (
  id         bigserial   PRIMARY KEY,
  bulk_id    uuid        NOT NULL,
  chunk      integer     NOT NULL,
  kind       text        NOT NULL, -- sent | failed
  idxs       integer[]   NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX outcome_batches_bulk ON bulk_work.outcome_batches (bulk_id);
CREATE INDEX outcome_batches_created ON bulk_work.outcome_batches (created_at);

-- Pacing is per sending number: a number with a spaced tier is served by one dispatcher at a time (the lease
-- holder). TIER_UNLIMITED numbers need no lease: any number of dispatchers share their recipients.
CREATE TABLE bulk_work.number_leases (
  number_id   integer     PRIMARY KEY,
  owner       text        NOT NULL,
  lease_until timestamptz NOT NULL
);
