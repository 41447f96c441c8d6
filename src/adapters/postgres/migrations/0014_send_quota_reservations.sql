-- Single sends to new recipients in flight on a number near its daily quota (src/commands/send/quota-gate.ts): the
-- quota gate counts them, with the accounts read model's unique recipients, until the read model shows the
-- recipient or the reservation expires (a crashed request's does). Transient by nature, so the table is unlogged.
CREATE UNLOGGED TABLE IF NOT EXISTS public.send_quota_reservations (
  reservation_id uuid PRIMARY KEY,
  number_id integer NOT NULL,
  recipient text NOT NULL, -- E.164, as the accounts read model's quota_recipients
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS send_quota_reservations_number ON public.send_quota_reservations (number_id, recipient);
