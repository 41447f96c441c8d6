-- A 2xx answer that names no message id (`invalid_response`: the provider accepted the message, we cannot tell its
-- id) is an unknown outcome too (2026-11-27, review 12): the partial index of 0016 is widened to it. Its predicate is
-- written the same in src/commands/bulk/work-unknown-outcomes.ts (outcomeUnknownSql), so that the planner uses it.
DROP INDEX IF EXISTS bulk_work.recipients_outcome_unknown;
CREATE INDEX IF NOT EXISTS recipients_outcome_unknown ON bulk_work.recipients (number_id, e164, claimed_at)
  WHERE state = 'failed' AND error_code IN ('interrupted', 'timeout', 'connection_lost', 'internal_error', 'invalid_response');
