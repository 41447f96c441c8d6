-- A retry asked while a delivery is in a sender's hands (docs/webhooks.md, "Retrying a delivery in flight"): the claim
-- stores its lease in claimed_until as well as in next_attempt_at, so a delivery whose due time is still its lease is
-- known to be claimed (in flight, or waiting in a lane) rather than waiting for a scheduled retry; a retry then only
-- sets retry_asked, and the record of the attempt in flight makes it due at once (unless it succeeded).
-- Rows of a version before leave claimed_until null: a retry treats them as before (due now).
ALTER TABLE webhooks.deliveries
  ADD COLUMN IF NOT EXISTS claimed_until timestamptz,
  ADD COLUMN IF NOT EXISTS retry_asked boolean NOT NULL DEFAULT false;
