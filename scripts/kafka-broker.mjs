#!/usr/bin/env node
// Runs the real Apache Kafka broker (single node, KRaft, org.apache.kafka:kafka_2.13 3.9.x) for tests and
// local development on a machine without Docker: Java + Maven are enough.
//
//   node scripts/kafka-broker.mjs start [--log-dir DIR]   prints "127.0.0.1:PORT" on stdout, runs until
//                                                          SIGTERM/SIGINT, then stops the broker and deletes
//                                                          its temp dir
//   node scripts/kafka-broker.mjs fetch                    only resolves the jars (e.g. to warm a CI cache)
//
// As a module:
//   const broker = await startKafkaBroker({ logDir });   // -> { brokers: '127.0.0.1:PORT', ... }
//   await broker.stop();      // stops the JVM (SIGTERM, SIGKILL after a timeout); keeps data dir and ports
//   await broker.start();     // starts the same broker again: same data dir, same ports, waits until ready
//   await broker.restart();   // stop() + start()
//   await broker.kill();      // SIGKILL (a crash, for fault tests); start() brings it back
//   await broker.destroy();   // stops it for good and deletes its temp dir
//
// The jars come from Maven (scripts/kafka/pom.xml, `mvn dependency:copy-dependencies`) into
// .cache/kafka/libs (git-ignored); the fetch is skipped when they are already there for this pom.
// The JVM never outlives this process: it is a non-detached child, killed by a process 'exit' handler,
// and a tiny shell watchdog kills it (and deletes the temp dir) if this process dies without running
// exit handlers (SIGKILL, crash).
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const POM = join(ROOT, 'scripts', 'kafka', 'pom.xml');
const DEFAULT_LIBS = join(ROOT, '.cache', 'kafka', 'libs');
const MARKER = '.fetched-for-pom';
const HOST = '127.0.0.1';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const freePort = () =>
  new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, HOST, () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });

const onPath = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

const tail = (file, lines = 40) => {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
};

function pomInfo() {
  const pom = readFileSync(POM, 'utf8');
  const version = /<kafka\.version>([^<]+)<\/kafka\.version>/.exec(pom)?.[1];
  if (!version) throw new Error(`no <kafka.version> in ${POM}`);
  return { version, hash: createHash('sha256').update(pom).digest('hex') };
}

/** Resolves the broker jars with Maven unless they are already in `libsDir` for the current pom. */
export async function ensureKafkaJars({ libsDir = process.env.KAFKA_LIBS_DIR || DEFAULT_LIBS, log = () => {} } = {}) {
  const { version, hash } = pomInfo();
  const markerFile = join(libsDir, MARKER);
  const ready = () =>
    existsSync(join(libsDir, `kafka_2.13-${version}.jar`)) &&
    existsSync(markerFile) &&
    readFileSync(markerFile, 'utf8').trim() === hash;
  if (ready()) return { libsDir, version, fetched: false };
  if (!onPath('mvn')) throw new Error('mvn is not on PATH (needed to fetch the Kafka broker jars)');

  // Fetch into a private dir, then move it into place: two runs fetching at once cannot mix their jars.
  mkdirSync(dirname(libsDir), { recursive: true });
  const staging = `${libsDir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  log(`fetching Apache Kafka ${version} jars with Maven into ${libsDir} ...`);
  const started = Date.now();
  const out = await new Promise((resolveRun, reject) => {
    const child = spawn(
      'mvn',
      ['-q', '-B', '-f', POM, 'dependency:copy-dependencies', `-Dkafka.libs.dir=${staging}`],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let text = '';
    child.stdout.on('data', (d) => (text += d));
    child.stderr.on('data', (d) => (text += d));
    child.on('error', reject);
    child.on('exit', (code) => resolveRun({ code, text }));
  });
  if (out.code !== 0) {
    rmSync(staging, { recursive: true, force: true });
    throw new Error(`mvn dependency:copy-dependencies failed (exit ${out.code}):\n${out.text.slice(-4000)}`);
  }
  writeFileSync(join(staging, MARKER), `${hash}\n`);
  if (existsSync(libsDir) && !ready()) rmSync(libsDir, { recursive: true, force: true }); // stale version
  try {
    renameSync(staging, libsDir);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    if (!ready()) throw err; // someone else won the race only if their result is usable
  }
  log(`fetched the Kafka jars in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { libsDir, version, fetched: true };
}

function serverProperties({ dataDir, port, controllerPort }) {
  return [
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@${HOST}:${controllerPort}`,
    `listeners=PLAINTEXT://${HOST}:${port},CONTROLLER://${HOST}:${controllerPort}`,
    `advertised.listeners=PLAINTEXT://${HOST}:${port}`,
    'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    `log.dirs=${dataDir}`,
    'num.partitions=3',
    'default.replication.factor=1',
    'min.insync.replicas=1',
    'auto.create.topics.enable=true',
    'offsets.topic.replication.factor=1',
    'offsets.topic.num.partitions=10',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'transaction.state.log.num.partitions=10',
    'group.initial.rebalance.delay.ms=0',
    // lets fault tests use short consumer session timeouts (the broker default minimum is 6 s)
    'group.min.session.timeout.ms=1000',
    // after a kill -9 the restarted broker must wait for its previous incarnation's session to expire
    'broker.session.timeout.ms=3000',
    'broker.heartbeat.interval.ms=500',
    'num.network.threads=2',
    'num.io.threads=4',
    'num.recovery.threads.per.data.dir=1',
    'log.retention.hours=24',
    '',
  ].join('\n');
}

const LOG4J = [
  'log4j.rootLogger=INFO, stdout',
  'log4j.appender.stdout=org.apache.log4j.ConsoleAppender',
  'log4j.appender.stdout.layout=org.apache.log4j.PatternLayout',
  'log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n',
  'log4j.logger.kafka.request.logger=WARN',
  'log4j.logger.state.change.logger=WARN',
  'log4j.logger.kafka.log=WARN',
  'log4j.logger.org.apache.kafka.storage.internals.log=WARN',
  'log4j.logger.org.apache.kafka.clients=WARN',
  '',
].join('\n');

function runToCompletion(cmd, args, { logFile, timeoutMs }) {
  return new Promise((resolveRun, reject) => {
    const fd = openSync(logFile, 'a');
    const child = spawn(cmd, args, { stdio: ['ignore', fd, fd], detached: false });
    closeSync(fd);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolveRun();
      else reject(new Error(`${args.includes('kafka.tools.StorageTool') ? 'kafka StorageTool format' : cmd} failed (exit ${code ?? signal}):\n${tail(logFile)}`));
    });
  });
}

async function waitUntilReady({ brokers, isAlive, deadline, logFile }) {
  const { Kafka, logLevel } = require('kafkajs');
  const kafka = new Kafka({
    clientId: 'kafka-broker-readiness',
    brokers: [brokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1000,
    requestTimeout: 3000,
    retry: { retries: 0 },
  });
  let lastError = 'not tried';
  while (Date.now() < deadline) {
    const alive = isAlive();
    if (alive !== true) throw new Error(`the Kafka broker exited during start-up (${alive}):\n${tail(logFile)}`);
    const admin = kafka.admin();
    try {
      await admin.connect();
      await admin.listTopics();
      return;
    } catch (err) {
      lastError = err?.message ?? String(err);
    } finally {
      await admin.disconnect().catch(() => {});
    }
    await sleep(250);
  }
  throw new Error(`the Kafka broker at ${brokers} was not ready in time (last error: ${lastError}):\n${tail(logFile)}`);
}

/**
 * Starts a single-node KRaft broker on 127.0.0.1 on free ports, in a fresh temp dir.
 * @param {{logDir?: string, heapMb?: number, readyTimeoutMs?: number, libsDir?: string, log?: (msg: string) => void}} [options]
 */
export async function startKafkaBroker(options = {}) {
  const { logDir, heapMb = 512, readyTimeoutMs = 90_000, log = () => {} } = options;
  if (!onPath('java')) throw new Error('java is not on PATH (needed to run the Kafka broker)');
  const { libsDir } = await ensureKafkaJars({ libsDir: options.libsDir, log });

  const root = mkdtempSync(join(tmpdir(), 'switchboard-kafka-'));
  const dataDir = join(root, 'data');
  const port = await freePort();
  let controllerPort = await freePort();
  while (controllerPort === port) controllerPort = await freePort();
  const brokers = `${HOST}:${port}`;
  if (logDir) mkdirSync(logDir, { recursive: true });
  const logFile = logDir ? join(logDir, `kafka-broker-${port}.log`) : join(root, 'broker.log');
  const propsFile = join(root, 'server.properties');
  const log4jFile = join(root, 'log4j.properties');
  const pidFile = join(root, 'java.pid');
  writeFileSync(propsFile, serverProperties({ dataDir, port, controllerPort }));
  writeFileSync(log4jFile, LOG4J);

  const classpath = `${libsDir}/*`;
  const commonJvm = ['-Djava.awt.headless=true', `-Dlog4j.configuration=${pathToFileURL(log4jFile).href}`];

  let child = null; // the running JVM
  let exited = null; // Promise resolved when `child` exits
  let exitInfo = null;
  let destroyed = false;

  // Watchdog: if this Node process dies without running 'exit' handlers, kill the JVM and delete the dir.
  const watchdogScript = [
    // re-parented (our parent, this Node process, is gone, even as an unreaped zombie) => clean up
    `while [ "$(cut -d' ' -f4 /proc/$$/stat 2>/dev/null)" = "${process.pid}" ]; do sleep 1; done`,
    `p=$(cat '${pidFile}' 2>/dev/null)`,
    `if [ -n "$p" ] && grep -q kafka.Kafka /proc/$p/cmdline 2>/dev/null; then kill -9 $p; fi`,
    `rm -rf '${root}'`,
  ].join('\n');
  const watchdog = spawn('sh', ['-c', watchdogScript], { stdio: 'ignore', detached: false });
  watchdog.unref();

  const killNow = () => {
    if (child && exitInfo === null) {
      try {
        child.kill('SIGKILL');
      } catch {}
    }
  };
  const onProcessExit = () => {
    killNow();
    try {
      if (watchdog && watchdog.exitCode === null) watchdog.kill('SIGKILL');
    } catch {}
    try {
      rmSync(root, { recursive: true, force: true });
    } catch {}
  };
  process.on('exit', onProcessExit);

  const fail = async (err) => {
    await destroy().catch(() => {});
    throw err;
  };

  const launch = async () => {
    if (destroyed) throw new Error('this Kafka broker was destroyed');
    if (child && exitInfo === null) return;
    const started = Date.now();
    const fd = openSync(logFile, 'a');
    exitInfo = null;
    child = spawn(
      'java',
      [
        `-Xmx${heapMb}m`, `-Xms${heapMb}m`, '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:+ExitOnOutOfMemoryError',
        ...commonJvm, `-Dkafka.logs.dir=${logDir ?? root}`,
        '-cp', classpath, 'kafka.Kafka', propsFile,
      ],
      { stdio: ['ignore', fd, fd], detached: false },
    );
    closeSync(fd);
    const me = child;
    exited = new Promise((resolveExit) => {
      me.on('error', (err) => {
        exitInfo = `spawn error: ${err.message}`;
        resolveExit();
      });
      me.on('exit', (code, signal) => {
        exitInfo = `exit ${code ?? signal}`;
        resolveExit();
      });
    });
    writeFileSync(pidFile, String(child.pid ?? ''));
    await waitUntilReady({
      brokers,
      isAlive: () => (exitInfo === null ? true : exitInfo),
      deadline: started + readyTimeoutMs,
      logFile,
    }).catch(async (err) => {
      killNow();
      await exited;
      throw err;
    });
    log(`Kafka broker ready at ${brokers} in ${((Date.now() - started) / 1000).toFixed(1)} s (log: ${logFile})`);
  };

  const halt = async (signal, timeoutMs) => {
    if (!child || exitInfo !== null) return;
    child.kill(signal);
    const timer = setTimeout(killNow, timeoutMs);
    await exited;
    clearTimeout(timer);
  };

  async function destroy() {
    if (destroyed) return;
    destroyed = true;
    await halt('SIGTERM', 5_000);
    process.removeListener('exit', onProcessExit);
    try {
      if (watchdog.exitCode === null) watchdog.kill('SIGKILL');
    } catch {}
    rmSync(root, { recursive: true, force: true });
  }

  try {
    await runToCompletion(
      'java',
      [
        '-Xmx256m', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', ...commonJvm,
        '-cp', classpath, 'kafka.tools.StorageTool', 'format',
        // `--cluster-id=ID`, not `-t ID`: a base64url id may start with '-', which the parser takes for an option
        `--cluster-id=${process.env.KAFKA_TEST_CLUSTER_ID ?? randomBytes(16).toString('base64url')}`, '-c', propsFile, '--ignore-formatted',
      ],
      { logFile, timeoutMs: 60_000 },
    );
    await launch();
  } catch (err) {
    await fail(err);
  }

  return {
    brokers,
    host: HOST,
    port,
    controllerPort,
    dataDir,
    logFile,
    get pid() {
      return exitInfo === null ? child?.pid : undefined;
    },
    isRunning: () => child !== null && exitInfo === null,
    /** Starts the broker again after stop()/kill(): same data dir, same ports. Resolves when ready. */
    start: launch,
    /** Graceful stop (SIGTERM, SIGKILL after `timeoutMs`); data dir and ports are kept for start(). */
    stop: ({ timeoutMs = 30_000 } = {}) => halt('SIGTERM', timeoutMs),
    /** Abrupt stop, like a crashed machine: SIGKILL. */
    kill: () => halt('SIGKILL', 5_000),
    restart: async (opts) => {
      await halt('SIGTERM', opts?.timeoutMs ?? 30_000);
      await launch();
    },
    /** Stops the broker for good and deletes its temp dir. */
    destroy,
  };
}

async function cli(argv) {
  const [cmd = 'start', ...rest] = argv;
  const say = (msg) => process.stderr.write(`[kafka-broker] ${msg}\n`);
  if (cmd === 'fetch') {
    const { libsDir, fetched } = await ensureKafkaJars({ log: say });
    say(fetched ? `jars in ${libsDir}` : `jars already in ${libsDir}`);
    return;
  }
  if (cmd !== 'start') {
    say('usage: node scripts/kafka-broker.mjs start [--log-dir DIR] | fetch');
    process.exitCode = 2;
    return;
  }
  const i = rest.indexOf('--log-dir');
  const logDir = i >= 0 ? rest[i + 1] : undefined;
  const broker = await startKafkaBroker({ logDir, log: say });
  process.stdout.write(`${broker.brokers}\n`);
  let stopping = false;
  const shutdown = async (signal) => {
    if (stopping) return;
    stopping = true;
    say(`${signal}: stopping the broker`);
    await broker.destroy();
    process.exit(0);
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => void shutdown(sig));
  // If the JVM dies on its own, say so and exit non-zero.
  const watch = setInterval(() => {
    if (!stopping && !broker.isRunning()) {
      say(`the broker exited unexpectedly; log tail:\n${tail(broker.logFile)}`);
      void broker.destroy().finally(() => process.exit(1));
    }
  }, 1000);
  void watch;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  cli(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`[kafka-broker] ${err?.stack ?? err}\n`);
    process.exit(1);
  });
}
