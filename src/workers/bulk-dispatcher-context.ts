// What the bulk dispatcher's parts share: its options, the context its helpers run in (services, id, clock,
// kill guard), and the error a killed dispatcher throws.
import type { MessagingProvider } from '../ports/provider';
import type { Services } from '../services';

export interface BulkDispatcherOptions {
  /** dispatcher id written on claimed rows (default host-pid-random) */
  id?: string;
  /** injectable clock (default services.now) */
  now?: () => Date;
  /** injectable sleep for pacing and retry waits (default setTimeout) */
  sleep?: (ms: number) => Promise<void>;
  /** the provider (default services.provider) */
  provider?: MessagingProvider;
  /** idle poll for new work, real time (default 500 ms; new bulks of this process wake it at once) */
  pollMs?: number;
  /** recipients claimed per window for TIER_UNLIMITED (default 200) */
  unlimitedWindow?: number;
  /** spaced tiers: a window covers about this much sending time (default 2 s; at least 1 recipient, at most 100) */
  windowMs?: number;
  /** provider calls in flight per number (default 16) */
  concurrency?: number;
  /** lease of an in_flight recipient (default 5 min): longer than any provider call with its retries */
  recipientLeaseMs?: number;
  /** lease of a number with a spaced tier (default 30 s, renewed every window) */
  numberLeaseMs?: number;
  /** attempts per recipient for retryable errors, the first included (default 4) */
  maxAttempts?: number;
  /** first retry delay, doubled per attempt (default 2 s), capped (default 60 s) */
  retryBaseMs?: number;
  maxRetryDelayMs?: number;
  /** number-level pause after a 130429 (throughput) answer (default 1 s) */
  throughputBackoffMs?: number;
  /** numbers served at once by this process (default 8) */
  maxNumbers?: number;
  /** chunk streams copied into the work table at a time (default 5) */
  materializeChunks?: number;
}

/** Thrown inside a killed dispatcher: nothing more is written (tests simulate a crash with kill()). */
export class DispatcherKilledError extends Error {
  override name = 'DispatcherKilledError';
}

export const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The options with their defaults applied (the constructor's). */
export type DispatcherSettings = Required<Omit<BulkDispatcherOptions, 'id' | 'now' | 'sleep' | 'provider'>>;

/** What the dispatcher hands its helpers (sending, recording, job state changes). */
export interface DispatcherContext {
  readonly services: Services;
  readonly id: string;
  readonly provider: MessagingProvider;
  readonly o: DispatcherSettings;
  now(): Date;
  /** throws DispatcherKilledError once the dispatcher is killed */
  guard(): void;
  /** stopping, or the bulk was cancelled: nothing more is sent for it */
  stopping(bulkId: string): boolean;
}
