// kafkajs 2.2.4 (its last release) keeps a timer loop running on every broker connection: each check of the
// connection's pending requests schedules the next one, with a negative delay (so about every millisecond) when
// nothing is pending and nothing is throttled (tulios/kafkajs#1704, #1556; the same negative delay is Node 23+'s
// TimeoutNegativeWarning, #1751). An idle `serve` or `worker` spent thousands of wake-ups a second on it.
// This replaces that one method with the fix proposed upstream: with nothing pending and no throttle to wait out,
// schedule nothing (a request that cannot go at once is queued by `push`, which schedules the check itself).
// docs/core.md, "Resilience".

/** The kafkajs release whose RequestQueue this replacement was written against. */
export const PATCHED_KAFKAJS_VERSION = '2.2.4';
const CHECK_PENDING_REQUESTS_INTERVAL_MS = 10; // kafkajs's own interval while requests wait

interface RequestQueueInternals {
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  pending: unknown[];
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

function scheduleCheckPendingRequests(this: RequestQueueInternals): void {
  if (this.throttleCheckTimeoutId) return;
  const untilUnthrottled = this.throttledUntil - Date.now();
  if (this.pending.length === 0 && untilUnthrottled <= 0) return;
  const delay = this.pending.length > 0 && untilUnthrottled <= 0 ? CHECK_PENDING_REQUESTS_INTERVAL_MS : untilUnthrottled;
  this.throttleCheckTimeoutId = setTimeout(() => {
    this.throttleCheckTimeoutId = null;
    this.checkPendingRequests();
  }, delay);
}

let outcome: 'installed' | 'other-version' | undefined;

/**
 * Installs the replacement once per process. Another kafkajs version is left alone ('other-version'): the
 * replacement must be checked against that version's RequestQueue first (test/unit/kafka-request-queue.test.ts).
 */
export function installRequestQueueIdleFix(): 'installed' | 'other-version' {
  if (outcome) return outcome;
  // `require`, not createRequire: under jest this must be the module registry that `import 'kafkajs'` uses
  const { version } = require('kafkajs/package.json') as { version: string };
  if (version !== PATCHED_KAFKAJS_VERSION) return (outcome = 'other-version');
  const RequestQueue = require('kafkajs/src/network/requestQueue') as { prototype: RequestQueueInternals };
  RequestQueue.prototype.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
  return (outcome = 'installed');
}
