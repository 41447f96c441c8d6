/**
 * At most one log line per `everyMs` for each kind of failure: `due(kind)` says whether this one is logged, and how
 * many of its kind were not logged since the last line (the others are counted, and that count goes in the next line).
 */
export class LogThrottle {
  /** per kind: when it was last logged, and how many were not logged since */
  private readonly logged = new Map<string, { at: number; notLogged: number }>();

  constructor(private readonly everyMs: number, private readonly now: () => number = Date.now) {}

  /** `{ notLoggedSinceLast }` when this failure is to be logged (the count starts again), undefined when it is counted */
  due(kind = ''): { notLoggedSinceLast: number } | undefined {
    const now = this.now();
    const last = this.logged.get(kind);
    if (last && now - last.at < this.everyMs) {
      last.notLogged++;
      return undefined;
    }
    this.logged.set(kind, { at: now, notLogged: 0 });
    return { notLoggedSinceLast: last?.notLogged ?? 0 };
  }
}
