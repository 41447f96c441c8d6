-- Per-API-key request counts of fixed windows, shared by every serve process (src/http/rate-limit-store.ts).
-- Counts are disposable (a crash loses at most the current window's counts), so the table is unlogged.
CREATE UNLOGGED TABLE IF NOT EXISTS public.rate_limit_windows (
  key text NOT NULL,
  window_start bigint NOT NULL, -- epoch milliseconds
  expires_at bigint NOT NULL,   -- epoch milliseconds
  count bigint NOT NULL,
  PRIMARY KEY (key, window_start)
);
CREATE INDEX IF NOT EXISTS rate_limit_windows_expires_at ON public.rate_limit_windows (expires_at);

