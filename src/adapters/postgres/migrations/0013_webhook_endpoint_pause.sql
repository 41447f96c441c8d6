-- An endpoint paused by a failed answer's Retry-After, for every sender (docs/webhooks.md, "Delivery"): written with
-- a notification to the senders LISTENing, read by a sender when its LISTEN starts (it missed those sent before).
-- Operational state, not a read model: never rebuilt, no event. Kept only while it may still hold: each pause
-- written deletes the expired ones.
CREATE TABLE IF NOT EXISTS webhooks.endpoint_pauses (
  endpoint_id text PRIMARY KEY,
  paused_until timestamptz NOT NULL
);
