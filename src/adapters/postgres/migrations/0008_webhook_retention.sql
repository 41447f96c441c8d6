-- The webhook log's retention (docs/webhooks.md, "Retention"): finished deliveries by the time they finished, for the
-- purge to find the expired ones without reading the outbox. Partial: a delivery gets its entry when it finishes
-- (a pending one has none), so queueing a delivery writes no more index entries than before.
CREATE INDEX IF NOT EXISTS deliveries_finished ON webhooks.deliveries (completed_at) WHERE status <> 'pending';
