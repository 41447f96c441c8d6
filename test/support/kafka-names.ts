import { randomBytes } from 'node:crypto';
import type { Kafka, KafkaMessage } from 'kafkajs';

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

/** Reads the first `count` records of `topic` with a consumer group of its own; throws after `timeoutMs`. */
export async function readTopic(
  kafka: Kafka,
  topic: string,
  count: number,
  options: { maxBytesPerPartition?: number; timeoutMs?: number } = {},
): Promise<KafkaMessage[]> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const reader = kafka.consumer({ groupId: `${topic}-reader`, ...(options.maxBytesPerPartition ? { maxBytesPerPartition: options.maxBytesPerPartition } : {}) });
  await reader.connect();
  await reader.subscribe({ topic, fromBeginning: true });
  const got: KafkaMessage[] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${got.length} of ${count} records on ${topic} within ${timeoutMs / 1000} s`)), timeoutMs);
      void reader.run({
        eachMessage: async ({ message }) => {
          got.push(message);
          if (got.length >= count) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
  } finally {
    await reader.disconnect();
  }
  return got;
}
