-- Projection checkpoints: stored in the same transaction as the read-model change they cover.
CREATE SCHEMA IF NOT EXISTS projections;

CREATE TABLE projections.checkpoints (
  name        text        PRIMARY KEY,
  version     integer     NOT NULL,
  position    text        NOT NULL DEFAULT '',
  state       text        NOT NULL DEFAULT 'running',
  error       text,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
