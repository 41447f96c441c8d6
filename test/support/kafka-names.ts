import { randomBytes } from 'node:crypto';

// Shared by the real-broker suites: names no other run uses, and a wait for an in-memory condition.

/** A topic and a consumer group of their own for one test. */
export const uniqueTopicAndGroup = (label: string) => {
  const id = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  return { topic: `test.${label}.${id}`, groupId: `test-${label}-${id}` };
};

/** Waits until `cond()` holds, looking every 20 ms; throws naming `what` after `timeoutMs`. */
export async function waitFor(what: string, cond: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
