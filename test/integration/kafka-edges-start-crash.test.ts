// A Kafka consumer that crashes while starting (REAL broker): kafkajs reports a crash it will not restart from
// inside run(), before the supervised subscription has the consumer. That consumer is stopped and the next start
// waits with the documented backoff (0.5 s doubling). Before, the dead consumer was kept as the running one and the
// backoff was reset on every cycle: a consumer was recreated every 0.5 s for ever. (No subscription piled up: each
// cycle stopped the previous one.)
// Skipped, with the reason, when no broker could be had (test/support/kafka.mjs).
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport, type TransportLogger } from '../../src/adapters/kafka/transport';
import { uniqueTopicAndGroup, waitFor } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) console.warn(`Kafka start-crash edge tests skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);

d('a consumer crashing while it starts (real broker)', () => {
  it('is replaced with a growing backoff, and no member is left after stop', async () => {
    const retries: Array<{ attempt: number; delayMs: number }> = [];
    const crashes: boolean[] = [];
    const logger: TransportLogger = {
      debug() {},
      info() {},
      warn: (obj, msg) => {
        const o = obj as { attempt?: number; delayMs?: number };
        if (msg === 'Kafka consumer not running; retrying') retries.push({ attempt: o.attempt!, delayMs: o.delayMs! });
      },
      error: (obj, msg) => {
        if (msg === 'Kafka consumer crashed') crashes.push((obj as { restart: boolean }).restart);
      },
    };
    // the test broker accepts session timeouts from 1 s: JoinGroup answers INVALID_SESSION_TIMEOUT, not retriable
    const transport = new KafkaTransport({ brokers: BROKERS!.split(','), clientId: 'switchboard-test-edges', logger, sessionTimeoutMs: 500 });
    const { topic, groupId } = uniqueTopicAndGroup('edges-start-crash');
    try {
      const subscription = await transport.subscribe(topic, async () => undefined, { groupId });
      await waitFor('three restarts', () => retries.length >= 3, 30_000);
      await subscription.stop();
      expect(retries.slice(0, 3)).toEqual([
        { attempt: 1, delayMs: 500 },
        { attempt: 2, delayMs: 1_000 },
        { attempt: 3, delayMs: 2_000 },
      ]);
      expect(crashes.slice(0, 3)).toEqual([false, false, false]); // kafkajs itself did not restart them

      // stopped: no member left in the group
      const admin = new Kafka({ clientId: 'switchboard-test-inspector', brokers: BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();
      await admin.connect();
      try {
        expect((await admin.describeGroups([groupId])).groups[0]?.members ?? []).toEqual([]);
      } finally {
        await admin.disconnect();
      }
    } finally {
      await transport.close();
    }
  }, 60_000);
});
