// The cost of an Idempotency-Key on single sends (issue #16, docs/idempotency.md): POST
// /api/v1/platform-templates/send/ with a fresh key per request against the same request without a key, on the
// same server (a forked child process, sandbox provider, 20 connections), in alternating rounds of one run so the
// noise of a shared machine hits both alike. Reports the medians and the ratio keyed/unkeyed (budget >= 0.85).
// BENCH_ROUNDS rounds (default 3) of BENCH_DURATION_S seconds (default 10) each, after a warm-up of each of
// BENCH_WARMUP_S seconds (default 8).
import { randomBytes } from 'node:crypto';
import { SandboxProvider } from '../src/adapters/provider/sandbox';
import { seedFixture } from '../src/commands/provisioning/seed';
import { buildApp } from '../src/http/app';
import { autocannon, BENCH_KEY, BENCH_PHONE_NUMBER_ID, cpuMsPer, cpuSnapshot, benchDatabase, benchSendsFixture, benchServices, type CannonResult, emit, exited, forkServer, log, median, nextMessage, round, runForkedBench, closeBenchServices } from './support';


const CONNECTIONS = 20;
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
// as bench/webhooks.ts: after 3 s the first unkeyed round was still warming up
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 8);
const KEY = BENCH_KEY;
const PHONE_NUMBER_ID = BENCH_PHONE_NUMBER_ID;

type FromChild = { type: 'ready'; url: string } | { type: 'stopped' } | { type: 'error'; message: string };

async function server(): Promise<void> {
  const send = (m: FromChild) => process.send!(m);
  const db = await benchDatabase('idempotency');
  const sandbox = new SandboxProvider({ delivery: 'off' });
  const services = benchServices(db, { provider: sandbox });
  await services.runner.start();
  await seedFixture(services, benchSendsFixture(), { actor: 'bench' });
  const app = await buildApp(services);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  process.on('message', () => {
    void (async () => {
      await app.close();
      await closeBenchServices(services, sandbox, db);
      send({ type: 'stopped' });
      process.exit(0);
    })().catch((err) => send({ type: 'error', message: String(err?.stack ?? err) }));
  });
  send({ type: 'ready', url });
}

async function main(): Promise<void> {
  const child = forkServer(__filename);
  try {
    const { url } = await nextMessage<FromChild, 'ready'>(child, 'ready');
    log(`idempotency bench: server ${url}, ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${DURATION_S} s`);
    let n = 0;
    const prefix = randomBytes(6).toString('hex');
    const body = () => JSON.stringify({
      phone_number_id: PHONE_NUMBER_ID,
      template_name: 'order_update',
      recipient_phone: `+54911${String(20_000_000 + (++n % 70_000_000) * 10 + 1)}`,
      variables: { name: 'Ana', total: { amount: 1234.5, code: 'ARS' } },
      button_variables: { button_0: `ORD-${n}` },
    });
    const run = (duration: number, keyed: boolean) =>
      autocannon({
        url: `${url}/api/v1/platform-templates/send/`,
        connections: CONNECTIONS,
        duration,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        requests: [{
          setupRequest: (req: { headers: Record<string, string> }) => {
            const b = body();
            return { ...req, body: b, headers: keyed ? { ...req.headers, 'idempotency-key': `${prefix}-${n}` } : req.headers };
          },
        }],
      });
    log(`warm-up (${WARMUP_S} s each)`);
    await run(WARMUP_S, false);
    await run(WARMUP_S, true);
    const unkeyed: CannonResult[] = [];
    const keyed: CannonResult[] = [];
    // CPU per send of the server, Postgres and this process (load generator), per round: the added cost measured
    // directly, less swayed than throughput by the machine's drift
    const cpu: { unkeyed: number[]; keyed: number[] } = { unkeyed: [], keyed: [] };
    for (let i = 0; i < ROUNDS; i++) {
      for (const withKey of [false, true]) {
        const c0 = cpuSnapshot(child.pid!);
        const r = await run(DURATION_S, withKey);
        const c1 = cpuSnapshot(child.pid!);
        const per = cpuMsPer(c0, c1, r['2xx']);
        log(`round ${withKey ? 'keyed' : 'unkeyed'}: ${r['2xx']} sends; CPU ms per send: server ${round(per.server, 3)}, postgres ${round(per.postgres, 3)}, load generator ${round(per.self, 3)}, total ${round(per.total, 3)}`);
        (withKey ? keyed : unkeyed).push(r);
        (withKey ? cpu.keyed : cpu.unkeyed).push(per.total);
      }
    }
    const rate = (r: CannonResult) => r['2xx'] / (r.duration || DURATION_S);
    const failed = [...unkeyed, ...keyed].reduce((s, r) => s + r.non2xx + r.errors + r.timeouts, 0);
    log(`unkeyed ${unkeyed.map((r) => round(rate(r))).join(', ')} /s; keyed ${keyed.map((r) => round(rate(r))).join(', ')} /s; failed ${failed}`);
    emit({
      bench: 'sends', metric: 'keyed_sends_per_s', value: round(median(keyed.map(rate))), unit: 'sends/s',
      baseline: 'unkeyed_sends', baseline_value: round(median(unkeyed.map(rate))), budget: 0.85,
      p99_ms: median(keyed.map((r) => r.latency.p99)), baseline_p99_ms: median(unkeyed.map((r) => r.latency.p99)),
      connections: CONNECTIONS, rounds: ROUNDS, failed,
      round_ratios: keyed.map((r, i) => round(rate(r) / rate(unkeyed[i]), 3)),
      cpu_ms_per_send: { unkeyed: round(median(cpu.unkeyed), 3), keyed: round(median(cpu.keyed), 3) },
    });
    child.send({ type: 'stop' });
    await nextMessage<FromChild, 'stopped'>(child, 'stopped');
    await exited(child);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}

runForkedBench('idempotency', server, main);
