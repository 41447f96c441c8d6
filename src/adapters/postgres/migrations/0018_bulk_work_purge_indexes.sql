-- The bulk lease sweep (src/workers/bulk-lease-cron.ts, every 15 s) reads the jobs it has work for through these
-- indexes, instead of every job ever created (2026-11-28, review 19, docs/growth.md). A job row is kept for good (one
-- per bulk send); its recipients' work rows are deleted 48 h after it finished. Before this migration each sweep joined
-- every finished job with every live work row (on 20,000 jobs and 200,000 work rows: both tables read whole, 3,692
-- buffers, 40 ms, to delete nothing), and looked for drafts by reading the whole jobs table.
-- `work_purged_at`: when the sweep deleted the job's work rows (null: not yet, or a version before this one); a job
-- purged is never looked at again. Added with no default (no table rewrite). A job finished before this migration has
-- it null: the sweep visits it once, a few jobs at a time, and marks it.
ALTER TABLE bulk_work.jobs ADD COLUMN IF NOT EXISTS work_purged_at timestamptz;
-- Both predicates are written the same in src/workers/bulk-lease-cron.ts, so that the planner uses them. Built plainly
-- (a migration is one transaction: no CONCURRENTLY); the jobs table has one row per bulk send ever created, a few
-- thousand to tens of thousands of rows: milliseconds, during which bulk creations wait.
CREATE INDEX IF NOT EXISTS jobs_work_to_purge ON bulk_work.jobs (updated_at)
  WHERE state IN ('finished', 'cancelled') AND work_purged_at IS NULL;
CREATE INDEX IF NOT EXISTS jobs_drafts ON bulk_work.jobs (created_at) WHERE state = 'draft';
