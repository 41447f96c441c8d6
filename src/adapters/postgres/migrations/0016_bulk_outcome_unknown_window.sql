-- Bulk recipients whose outcome is unknown (failed after the provider may have taken the message: interrupted by a
-- crash, a timeout, a connection lost, an unexpected failure) keep counting in their number's rolling 24 h quota
-- window, from their claim (docs/bulk.md, "Crashes and leases"). The quota counts of the bulk claims and of the
-- single sends' gate find them through this index, which holds only them: a refused recipient sent nothing, and the
-- number's sent rows are in recipients_window. Its predicate is written the same in
-- src/commands/bulk/work-unknown-outcomes.ts (outcomeUnknownSql), so that the planner uses it.
CREATE INDEX IF NOT EXISTS recipients_outcome_unknown ON bulk_work.recipients (number_id, e164, claimed_at)
  WHERE state = 'failed' AND error_code IN ('interrupted', 'timeout', 'connection_lost', 'internal_error');
