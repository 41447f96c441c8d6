-- Postgres event store. Global order is (tx_id, seq): readers only read below the oldest running
-- transaction (pg_snapshot_xmin), so an event whose transaction commits late is never skipped.
CREATE SCHEMA IF NOT EXISTS es;

CREATE TABLE es.events (
  seq             bigserial   NOT NULL,
  tx_id           bigint      NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
  stream_id       text        NOT NULL,
  stream_revision bigint      NOT NULL,
  event_id        uuid        NOT NULL,
  type            text        NOT NULL,
  data            jsonb       NOT NULL,
  metadata        jsonb       NOT NULL,
  recorded_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (stream_id, stream_revision)
);
CREATE UNIQUE INDEX events_global_order ON es.events (tx_id, seq);
CREATE UNIQUE INDEX events_event_id ON es.events (event_id);

CREATE FUNCTION es.notify_appended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('es_appended', '');
  RETURN NULL;
END $$;

CREATE TRIGGER events_appended AFTER INSERT ON es.events
  FOR EACH STATEMENT EXECUTE FUNCTION es.notify_appended();
