// Single template sends and delivery statuses (ARCHITECTURE section 13):
//  1. POST /api/v1/platform-templates/send/ with the sandbox provider (no latency, delivery off), 20 connections
//     (autocannon, in this process) against the real HTTP server (a forked child process, so load generator
//     and server do not share an event loop): sends/s (budget >= 1000/s) and p99 latency (budget < 50 ms).
//     Every send is the full write path: auth, number/template/quota reads, the send's append, the provider
//     call, the outbound chat message, and the wait for the read models (read-your-writes).
//  2. Provider statuses through Kafka: delivered + read for every send of step 1, published to
//     provider.webhooks, applied by the delivery consumer: statuses applied/s (budget >= 5000/s), measured
//     from the first to the last applied status (the consumer group's join is not counted).
//     Broker: KAFKA_BROKERS, else Apache Kafka started with scripts/kafka-broker.mjs (Java + Maven), else the
//     line reports skipped.
//  3. Webhook ingress onto Kafka (signed POST /webhooks/provider, 10 statuses per request, 20 connections):
//     requests/s, for information (no budget).
// Stdout: JSON lines only; progress on stderr. Step 1 runs BENCH_ROUNDS rounds (default 3) of BENCH_DURATION_S seconds
// (default 10) after a 3 s warm-up, and reports the medians: the machine may be shared (as in bench/contacts.ts).
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { KafkaTransport } from '../src/adapters/kafka/transport';
import { SandboxProvider } from '../src/adapters/provider/sandbox';
import { seedFixture } from '../src/commands/provisioning/seed';
import { buildApp } from '../src/http/app';
import type { RecordTransport } from '../src/ports/transport';
import type { Services } from '../src/services';
import { PROVIDER_WEBHOOK_TOPIC, signWebhook, statusWebhook } from '../src/shared/provider-webhook';
import { startDeliveryConsumer } from '../src/workers/delivery-consumer';
import { autocannon, BENCH_KEY, BENCH_PHONE_NUMBER_ID, benchDatabase, benchSendsFixture, type CannonResult, providerStatusRecords, benchServices, emit, exited, forkServer, log, median, nextMessage, round, runForkedBench, closeBenchServices } from './support';


const CONNECTIONS = 20;
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const KEY = BENCH_KEY;
const PHONE_NUMBER_ID = BENCH_PHONE_NUMBER_ID;
const APP_SECRET = 'bench-app-secret';

const fixture = benchSendsFixture();

type ToChild = { type: 'statuses'; brokers: string } | { type: 'stop' };
type FromChild =
  | { type: 'ready'; url: string }
  | { type: 'statuses'; perS: number; statuses: number; applied: number; ingressUrl: string; payload: string; partitions: number | null }
  | { type: 'stopped'; accepted: number }
  | { type: 'error'; message: string };

// ---- child: the server -----------------------------------------------------------------------------

function prefixed(inner: RecordTransport, prefix: string): RecordTransport {
  return {
    kind: inner.kind,
    publish: (topic, records) => inner.publish(prefix + topic, records),
    subscribe: (topic, handler, options) => inner.subscribe(prefix + topic, handler, { ...options, groupId: prefix + options.groupId }),
    ping: () => inner.ping(),
    close: () => inner.close(),
  };
}

async function countStatuses(services: Services): Promise<number> {
  const r = await services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM es.events WHERE type = 'DeliveryStatusRecorded'`);
  return r.rows[0].n;
}

async function server(): Promise<void> {
  const send = (m: FromChild) => process.send!(m);
  const db = await benchDatabase('sends');
  const sandbox = new SandboxProvider({ delivery: 'off', latencyMs: Number(process.env.BENCH_SANDBOX_LATENCY_MS ?? 0) });
  const services = benchServices(db, { env: { PROVIDER_APP_SECRET: APP_SECRET, PROVIDER_VERIFY_TOKEN: 'bench' }, provider: sandbox });
  await services.runner.start();
  await seedFixture(services, fixture, { actor: 'bench' });
  const app = await buildApp(services);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  let kafka: KafkaTransport | undefined;
  let ingress: Awaited<ReturnType<typeof buildApp>> | undefined;

  process.on('message', (m: ToChild) => {
    void (async () => {
      try {
        if (m.type === 'statuses') {
          // BENCH_KAFKA_PARTITIONS: partitions of the bench's topic and partitions consumed concurrently (default:
          // the broker's num.partitions and the transport's default concurrency, as in production)
          const partitions = process.env.BENCH_KAFKA_PARTITIONS ? Number(process.env.BENCH_KAFKA_PARTITIONS) : undefined;
          kafka = new KafkaTransport({
            brokers: m.brokers.split(','), clientId: 'switchboard-bench', logger: { info() {}, warn() {}, error() {} },
            ...(partitions ? { numPartitions: partitions, partitionsConsumedConcurrently: partitions } : {}),
          });
          const transport = prefixed(kafka, `bench-${randomBytes(3).toString('hex')}.`);
          const kservices: Services = { ...services, transport };
          await services.runner.catchUp();
          const ids = (await db.pool.query<{ id: string }>('SELECT provider_message_id AS id FROM rm_sends.sends WHERE provider_message_id IS NOT NULL')).rows.map((r) => r.id);
          const now = Math.floor(Date.now() / 1000);
          const records = providerStatusRecords(PHONE_NUMBER_ID, ids, ['delivered', 'read'], now);
          log(`publishing ${records.length} statuses for ${ids.length} sends`);
          for (let i = 0; i < records.length; i += 5000) await transport.publish(PROVIDER_WEBHOOK_TOPIC, records.slice(i, i + 5000));
          const base = await countStatuses(services);
          const consumer = await startDeliveryConsumer(kservices);
          let firstAt = 0;
          let firstCount = base;
          let count = base;
          const deadline = Date.now() + 180_000;
          while (count < base + records.length && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 50));
            count = await countStatuses(services);
            if (!firstAt && count > base) {
              firstAt = Date.now();
              firstCount = count;
            }
          }
          const lastAt = Date.now();
          await consumer.stop();
          const perS = (count - firstCount) / Math.max(0.001, (lastAt - firstAt) / 1000);
          ingress = await buildApp(kservices);
          const ingressUrl = await ingress.listen({ port: 0, host: '127.0.0.1' });
          const payload = JSON.stringify(statusWebhook(ids.slice(0, 10).map((id) => ({
            phoneNumberId: PHONE_NUMBER_ID, providerMessageId: id, status: 'read' as const, timestamp: String(now + 60), recipientId: '1',
          }))));
          send({ type: 'statuses', perS, statuses: records.length, applied: count - base, ingressUrl, payload, partitions: partitions ?? null });
        } else if (m.type === 'stop') {
          await ingress?.close();
          await kafka?.close();
          await app.close();
          await closeBenchServices(services, sandbox, db);
          send({ type: 'stopped', accepted: sandbox.acceptedCount });
          process.exit(0);
        }
      } catch (err) {
        send({ type: 'error', message: (err as Error)?.stack ?? String(err) });
      }
    })();
  });
  send({ type: 'ready', url });
}

// ---- parent: load generator ------------------------------------------------------------------------

async function startBroker(): Promise<{ brokers: string; stop(): Promise<void> } | { skipped: string }> {
  if (process.env.KAFKA_BROKERS) return { brokers: process.env.KAFKA_BROKERS, stop: async () => {} };
  try {
    const mod = await import(pathToFileURL(resolve('scripts/kafka-broker.mjs')).href);
    const broker = await mod.startKafkaBroker({ log: (m: string) => log(`[kafka] ${m}`) });
    return { brokers: broker.brokers, stop: () => broker.destroy() };
  } catch (err) {
    return { skipped: `no Kafka broker: KAFKA_BROKERS unset and the local broker failed: ${(err as Error).message}` };
  }
}

async function main(): Promise<void> {
  const child = forkServer(__filename);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    child.send({ type: 'stop' } satisfies ToChild);
    await nextMessage<FromChild, 'stopped'>(child, 'stopped');
    await exited(child);
  };
  try {
    const { url } = await nextMessage<FromChild, 'ready'>(child, 'ready');
    log(`sends bench: server ${url} (pid ${child.pid}), ${CONNECTIONS} connections, ${ROUNDS} rounds of ${DURATION_S} s`);
    let n = 0;
    const body = () => JSON.stringify({
      phone_number_id: PHONE_NUMBER_ID,
      template_name: 'order_update',
      // last digit 1: never a number ending in 0000 (the sandbox refuses those with 131026)
      recipient_phone: `+54911${String(20_000_000 + (++n % 70_000_000) * 10 + 1)}`,
      variables: { name: 'Ana', total: { amount: 1234.5, code: 'ARS' } },
      button_variables: { button_0: `ORD-${n}` },
    });
    const run = (duration: number) =>
      autocannon({
        url: `${url}/api/v1/platform-templates/send/`,
        connections: CONNECTIONS,
        duration,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        requests: [{ setupRequest: (req: object) => ({ ...req, body: body() }) }],
      });
    log('warm-up (3 s)');
    await run(3);
    const results: CannonResult[] = [];
    for (let i = 0; i < ROUNDS; i++) results.push(await run(DURATION_S));
    const rates = results.map((r) => r['2xx'] / (r.duration || DURATION_S));
    const failed = results.reduce((n, r) => n + r.non2xx + r.errors + r.timeouts, 0);
    log(`sends: rates ${rates.map((x) => round(x)).join(', ')} /s; p99 ${results.map((r) => r.latency.p99).join(', ')} ms; p50 ${results.map((r) => r.latency.p50).join(', ')} ms; failed ${failed}`);
    emit({ bench: 'sends', metric: 'single_sends_per_s', value: round(median(rates)), unit: 'sends/s', budget: 1000, connections: CONNECTIONS, rounds: ROUNDS, failed });
    emit({ bench: 'sends', metric: 'single_send_p99_ms', value: round(median(results.map((r) => r.latency.p99)), 2), unit: 'ms', budget: 50, p50_ms: median(results.map((r) => r.latency.p50)) });

    const broker = await startBroker();
    if ('skipped' in broker) {
      log(broker.skipped);
      emit({ bench: 'sends', metric: 'statuses_applied_per_s', value: 0, unit: 'statuses/s', budget: 5000, ok: false, skipped: broker.skipped });
    } else {
      try {
        child.send({ type: 'statuses', brokers: broker.brokers } satisfies ToChild);
        const s = await nextMessage<FromChild, 'statuses'>(child, 'statuses');
        log(`statuses: ${s.applied} of ${s.statuses} applied`);
        emit({
          bench: 'sends', metric: 'statuses_applied_per_s', value: round(s.perS), unit: 'statuses/s', budget: 5000, statuses: s.statuses, applied: s.applied,
          ...(s.partitions ? { partitions: s.partitions } : {}),
        });
        const wr = await autocannon({
          url: `${s.ingressUrl}/webhooks/provider`, connections: CONNECTIONS, duration: 5, method: 'POST', body: s.payload,
          headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, s.payload) },
        });
        emit({ bench: 'sends', metric: 'webhook_ingress_per_s', value: round(wr['2xx'] / (wr.duration || 5)), unit: 'req/s', statuses_per_request: 10, p99_ms: wr.latency.p99, failed: wr.non2xx + wr.errors });
        await stop();
      } finally {
        await broker.stop();
      }
    }
    await stop();
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}

runForkedBench('sends', server, main);
