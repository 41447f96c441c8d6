// The Idempotency-Key's timing (docs/idempotency.md), shared by the HTTP layer's key records (src/http/idempotency.ts)
// and the keyed send, whose stream is its key's record (src/commands/send/keyed.ts).

/** a key is remembered this long from its first use */
export const KEY_TTL_MS = 24 * 60 * 60 * 1000;
/** a request under a key counts as in flight this long: an HTTP claim's lease (renewed by its process), a keyed send's request */
export const LEASE_MS = 15_000;
/** how long a repeat waits for the first request in flight before answering 409 */
export const IN_FLIGHT_WAIT_MS = 5_000;
/** how often a waiting repeat looks again for an answer recorded by another process */
export const IN_FLIGHT_POLL_MS = 200;

/**
 * Whether what a keyed request made at `madeAt` belongs to an earlier use of its key: made 24 h or more ago, so
 * the key expired since and now runs as a new request (a keyed creation then looks at the key's next use).
 */
export const isFromAnEarlierUse = (madeAt: string, now: Date): boolean => now.getTime() - Date.parse(madeAt) >= KEY_TTL_MS;

/**
 * The time a repeat judges what another process made under the key by (its `madeAt` is the writer's clock): this
 * process's clock, and where that says the key's 24 h (or a keyed send's 600 s) have passed, the earlier of it and
 * Postgres's (docs/reliability.md, "Clocks of several processes"), so that a clock ahead of the writer's neither
 * makes a second message or bulk or endpoint nor ends a live request. Postgres's clock (`databaseNow`) is read at
 * most once per repeat, and only for an old or unanswered request, never on the normal path.
 */
export interface RepeatClock {
  own(): Date;
  /** the earlier of this process's clock and Postgres's */
  both(): Promise<Date>;
}

export function repeatClock(now: () => Date, databaseNow: () => Promise<Date>): RepeatClock {
  let databaseAheadMs: number | undefined; // Postgres's clock less this host's
  return {
    own: now,
    async both() {
      if (databaseAheadMs === undefined) databaseAheadMs = (await databaseNow()).getTime() - Date.now();
      const own = now();
      const database = Date.now() + databaseAheadMs;
      return database < own.getTime() ? new Date(database) : own;
    },
  };
}

/** isFromAnEarlierUse by both clocks of `clock` (Postgres's read only when this process's says so). */
export const isFromAnEarlierUseByBoth = async (madeAt: string, clock: RepeatClock): Promise<boolean> =>
  isFromAnEarlierUse(madeAt, clock.own()) && isFromAnEarlierUse(madeAt, await clock.both());

/**
 * The seed of a keyed creation's deterministic id: the company, the key and the key's use (0 for its first 24 h,
 * then 1, 2, ... for each later use after it expired; a use starts at most once a day, so a key reused daily
 * reads one stream per earlier day).
 */
export const keyedIdSeed = (companyId: number, key: string, use: number): string => (use === 0 ? `${companyId}:${key}` : `${companyId}:${key}:${use}`);
