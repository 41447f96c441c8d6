// The Kafka broker for the test run (called once by global-setup.mjs):
//   1. KAFKA_BROKERS set: use that cluster;
//   2. else, with `java` and `mvn` on PATH: run the real Apache Kafka broker (scripts/kafka-broker.mjs);
//   3. else: the Kafka suites skip, with a reason naming what is missing.
// A broker that fails to start never fails the run: the reason is printed to stderr and the suites skip.
import { spawnSync } from 'node:child_process';

const onPath = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

export async function startTestKafka() {
  if (process.env.KAFKA_BROKERS) return { brokers: process.env.KAFKA_BROKERS };

  const missing = ['java', 'mvn'].filter((cmd) => !onPath(cmd));
  if (missing.length > 0) {
    return {
      skipReason: `no Kafka broker: KAFKA_BROKERS is unset and ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not on PATH (needed to run Apache Kafka from its Maven jars)`,
    };
  }

  const started = Date.now();
  try {
    const { startKafkaBroker } = await import('../../scripts/kafka-broker.mjs');
    const broker = await startKafkaBroker({
      // the broker log goes to the broker's temp dir (deleted at the end) unless TEST_KAFKA_LOG_DIR is set
      logDir: process.env.TEST_KAFKA_LOG_DIR || undefined,
      log: (msg) => process.stderr.write(`[test-kafka] ${msg}\n`),
    });
    process.stderr.write(`[test-kafka] broker ${broker.brokers} up in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    return {
      brokers: broker.brokers,
      /** for fault tests run in this process; the suites (jest workers) only see TEST_KAFKA_BROKERS */
      broker,
      stop: () => broker.destroy(),
    };
  } catch (err) {
    const reason = `the Kafka broker failed to start: ${err?.message ?? err}`;
    process.stderr.write(`[test-kafka] ${reason}\n`);
    return { skipReason: reason };
  }
}
