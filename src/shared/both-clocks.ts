// Leases, expiries and reservations are written with one process's clock and judged by another's (docs/reliability.md,
// "Clocks of several processes"): a time has passed only once both the judging process's clock (a statement parameter)
// and Postgres's `now()` have passed it, so a process whose clock runs ahead neither takes over nor deletes what
// another still holds. The rule's two SQL spellings, one the negation of the other.

/** SQL: `at` has passed by both clocks (`callerNow`: the caller's clock as a parameter, e.g. `$1`). */
export const passedByBothClocks = (at: string, callerNow: string): string => `(${at} <= ${callerNow} AND ${at} <= now())`;

/** SQL: `at` is still ahead by either clock (not passedByBothClocks). */
export const aheadByEitherClock = (at: string, callerNow: string): string => `(${at} > ${callerNow} OR ${at} > now())`;
