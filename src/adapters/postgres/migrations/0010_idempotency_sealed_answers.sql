-- Idempotency-Key answers are kept sealed (src/http/idempotency-store.ts, docs/idempotency.md): a new state,
-- 'sealed', for a completed record whose body is ciphertext. 'completed' rows (plaintext, written before) stay
-- valid until they expire. A process of the version before reads a 'sealed' row as a request still in flight:
-- during a rolling upgrade its repeat waits, then answers 409 with Retry-After, and the client's retry is
-- replayed by a process of this version.
ALTER TABLE public.idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_state_check;
ALTER TABLE public.idempotency_keys ADD CONSTRAINT idempotency_keys_state_check CHECK (state IN ('in_flight', 'completed', 'sealed'));
