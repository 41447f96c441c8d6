-- Each endpoint's number of logged attempts, for the `count` of GET .../deliveries/ without counting the log (an
-- endpoint may have millions of attempts within the retention window; docs/webhooks.md, "Endpoints API").
-- Kept by statement-level triggers on the attempt log, so every writer counts: the sender's records, the retention
-- purge, an older version of the service during a rolling upgrade, an operator's DELETE. One upsert per statement
-- and endpoint, from the statement's transition table.
CREATE TABLE IF NOT EXISTS webhooks.attempt_counts (
  endpoint_id text PRIMARY KEY,
  attempts bigint NOT NULL
);

CREATE OR REPLACE FUNCTION webhooks.count_attempts_logged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhooks.attempt_counts AS c (endpoint_id, attempts)
    SELECT endpoint_id, count(*) FROM logged GROUP BY endpoint_id ORDER BY endpoint_id
  ON CONFLICT (endpoint_id) DO UPDATE SET attempts = c.attempts + EXCLUDED.attempts;
  RETURN NULL;
END $$;

-- the same upsert, endpoints in the same order: a purge and a record touching the same endpoints cannot deadlock
CREATE OR REPLACE FUNCTION webhooks.count_attempts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhooks.attempt_counts AS c (endpoint_id, attempts)
    SELECT endpoint_id, -count(*) FROM deleted GROUP BY endpoint_id ORDER BY endpoint_id
  ON CONFLICT (endpoint_id) DO UPDATE SET attempts = c.attempts + EXCLUDED.attempts;
  RETURN NULL;
END $$;

-- Creating a trigger locks the log against writes until this migration commits, so the counts taken below are
-- exact from the start.
DROP TRIGGER IF EXISTS attempts_logged ON webhooks.attempts;
CREATE TRIGGER attempts_logged AFTER INSERT ON webhooks.attempts
  REFERENCING NEW TABLE AS logged FOR EACH STATEMENT EXECUTE FUNCTION webhooks.count_attempts_logged();
DROP TRIGGER IF EXISTS attempts_deleted ON webhooks.attempts;
CREATE TRIGGER attempts_deleted AFTER DELETE ON webhooks.attempts
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION webhooks.count_attempts_deleted();

INSERT INTO webhooks.attempt_counts (endpoint_id, attempts)
  SELECT endpoint_id, count(*) FROM webhooks.attempts GROUP BY endpoint_id
ON CONFLICT (endpoint_id) DO UPDATE SET attempts = EXCLUDED.attempts;
