import { LogThrottle } from '../../src/shared/log-throttle';

// Review 15: the Cloud API adapter (network failures, per kind) and the webhook HTTP client (the egress proxy) each
// throttled their log lines by hand; both use LogThrottle now. Its rule, with a clock the test moves: at most one
// line per period for each kind, the failures not logged in between counted in the next line.

describe('review15: LogThrottle, one log line per period and kind, the others counted in the next', () => {
  it('logs the first, counts the rest of the period, and logs again with the count once the period is over', () => {
    let now = 1_000;
    const throttle = new LogThrottle(10_000, () => now);
    expect(throttle.due('refused')).toEqual({ notLoggedSinceLast: 0 });
    now += 1; expect(throttle.due('refused')).toBeUndefined();
    now += 9_998; expect(throttle.due('refused')).toBeUndefined();
    now += 1; expect(throttle.due('refused')).toEqual({ notLoggedSinceLast: 2 });
    now += 10_000; expect(throttle.due('refused')).toEqual({ notLoggedSinceLast: 0 });
  });

  it('each kind has its own period and count; no kind given is one kind', () => {
    let now = 0;
    const throttle = new LogThrottle(10_000, () => now);
    expect(throttle.due('refused')).toEqual({ notLoggedSinceLast: 0 });
    expect(throttle.due('timed out')).toEqual({ notLoggedSinceLast: 0 });
    expect(throttle.due('refused')).toBeUndefined();
    expect(throttle.due()).toEqual({ notLoggedSinceLast: 0 });
    expect(throttle.due()).toBeUndefined();
    now = 10_000;
    expect(throttle.due('timed out')).toEqual({ notLoggedSinceLast: 0 });
    expect(throttle.due('refused')).toEqual({ notLoggedSinceLast: 1 });
    expect(throttle.due()).toEqual({ notLoggedSinceLast: 1 });
  });
});
