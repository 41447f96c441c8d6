-- Secrets rotated out before the previous one and still in their 24 h sign too (docs/webhooks.md, "Rotations
-- within 24 h"): the endpoints read model keeps them in `older_secrets`. Added in place (a constant default: no
-- table rewrite) rather than by a projection version bump, whose rebuild would leave the live table without the
-- column, and every endpoint read failing, until the swap. A table made after this by the projection's DDL has it
-- already; a fresh database has no table yet (IF EXISTS).
ALTER TABLE IF EXISTS rm_webhooks.endpoints ADD COLUMN IF NOT EXISTS older_secrets jsonb NOT NULL DEFAULT '[]';
