-- Two partial indexes of the webhook outbox (docs/webhooks.md). Neither has an entry for a pending delivery, so
-- queueing a delivery writes no more index entries than before.
-- Retention: finished deliveries by the time they finished, for the purge to find the expired ones without reading
-- the outbox (one entry per delivery, written when it finishes).
CREATE INDEX IF NOT EXISTS deliveries_finished ON webhooks.deliveries (completed_at) WHERE status <> 'pending';
-- Recovery: an endpoint's failed deliveries by the time they failed, for POST .../recover/ (an entry only for a
-- delivery that failed, which is rare).
CREATE INDEX IF NOT EXISTS deliveries_failed ON webhooks.deliveries (endpoint_id, completed_at) WHERE status = 'failed';
