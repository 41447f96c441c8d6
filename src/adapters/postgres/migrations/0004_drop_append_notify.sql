-- pg_notify holds a cluster-wide lock through commit, serialising every append's commit (no group commit).
-- Runners are woken in-process by the appending process and otherwise poll (ProjectionRunner pollMs).
DROP TRIGGER IF EXISTS events_appended ON es.events;
DROP FUNCTION IF EXISTS es.notify_appended();
