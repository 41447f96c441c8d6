// Read endpoints under load: GET /api/v1/business-accounts/ and /api/v1/business-hours/ (real app, real
// Postgres, the example fixture seeded) against a bare fastify route, 50 connections each, measured in the same
// run with autocannon in a separate process (loopback only). Budgets: ≥ 40% of the bare route's req/s, p99 < 20 ms.
// One more line without a budget, `auth_only_req_per_s`: a route of the same app that only authenticates (the
// API key lookup every endpoint does), the ceiling any authenticated read can reach.
// Rate limiting (docs/rate-limits.md): the app runs with it on, at a limit the load never reaches (so every request
// is counted and synced to Postgres, and, far from the limit, answered without the RateLimit-* headers, as most
// requests of most keys are); `rate_limited_reads_per_s` compares business-accounts
// on it with the same route on a second app of the same services with rate limiting off, in PAIRS back-to-back
// pairs (alternating which goes first, so drifting load on a shared machine hits both alike): the ratio is the
// median of the pairs' ratios, budget >= 0.9.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import Fastify from 'fastify';
import { InProcessTransport } from '../src/adapters/in-process/transport';
import { seedFixture } from '../src/commands/provisioning/seed';
import { buildApp } from '../src/http/app';
import { benchDatabase, benchServices, emit, log, median, round } from './support';

const CONNECTIONS = 50;
const DURATION_S = Number(process.env.BENCH_READS_SECONDS ?? 10);
const WARMUP_S = 2;
const PAIRS = 5;
const PAIR_S = Number(process.env.BENCH_READS_PAIR_SECONDS ?? 4);

interface Cannon {
  reqPerSec: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** autocannon in its own process (so it does not share the server's event loop); its JSON result. */
function cannon(url: string, seconds: number, headers: Record<string, string> = {}): Promise<Cannon> {
  const bin = require.resolve('autocannon/autocannon.js');
  const args = [bin, '-c', String(CONNECTIONS), '-d', String(seconds), '-j', '-n'];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
  args.push(url);
  return new Promise((ok, fail) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (err += c));
    child.on('error', fail);
    child.on('exit', (code) => {
      if (code !== 0) return fail(new Error(`autocannon exited ${code}: ${err}`));
      try {
        const r = JSON.parse(out);
        ok({ reqPerSec: r.requests.average, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors + r.timeouts });
      } catch (e) {
        fail(new Error(`autocannon output is not JSON: ${(e as Error).message}: ${out.slice(0, 200)}`));
      }
    });
  });
}

async function measure(name: string, url: string, headers: Record<string, string> = {}, seconds = DURATION_S): Promise<Cannon> {
  log(`${name}: warm-up ${WARMUP_S} s`);
  await cannon(url, WARMUP_S, headers);
  log(`${name}: ${CONNECTIONS} connections for ${seconds} s`);
  const r = await cannon(url, seconds, headers);
  log(`${name}: ${Math.round(r.reqPerSec)} req/s, p99 ${r.p99} ms`);
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx responses, ${r.errors} errors`);
  return r;
}

async function main(): Promise<void> {
  const db = await benchDatabase('reads');
  const transport = new InProcessTransport();
  const services = benchServices(db, { transport, env: { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_PER_MINUTE: '1000000000' } });
  await services.runner.start();
  const bare = Fastify({ logger: false });
  bare.get('/bare', async () => ({ status: 'ok', service: 'switchboard', version: 1 }));
  const app = await buildApp(services, { logger: false });
  const unlimited = await buildApp({ ...services, config: { ...services.config, rateLimit: { ...services.config.rateLimit, enabled: false } } }, { logger: false });
  app.get('/bench/auth-only', async (request) => {
    await app.authenticate(request, 'company');
    return { status: 'ok' };
  });
  try {
    const fixture = JSON.parse(readFileSync(resolve(__dirname, '../../../test/fixtures/example-fixture.json'), 'utf8'));
    for (const c of fixture.companies) c.contacts = [];
    await seedFixture(services, fixture, { actor: 'bench' });
    const key = fixture.companies[0].apiKeys[0].key as string;

    const bareUrl = await bare.listen({ host: '127.0.0.1', port: 0 });
    const appUrl = await app.listen({ host: '127.0.0.1', port: 0 });
    const unlimitedUrl = await unlimited.listen({ host: '127.0.0.1', port: 0 });
    const check = await fetch(`${appUrl}/api/v1/business-accounts/`, { headers: { 'x-api-key': key } });
    if (check.status !== 200) throw new Error(`business-accounts answered ${check.status}: ${await check.text()}`);
    // far from its limit the key's answers carry no RateLimit-* headers (docs/rate-limits.md, "Responses"): the counter tells
    if (!app.rateLimitCounter || unlimited.rateLimitCounter) throw new Error('rate limiting is not on in the one app and off in the other');
    await app.rateLimitCounter.sync();
    const counted = (await db.pool.query<{ n: string | null }>('SELECT sum(count) AS n FROM public.rate_limit_windows')).rows[0].n;
    if (Number(counted) < 1) throw new Error(`rate limiting is on but counted nothing: ${counted}`);

    const baseline = await measure('bare fastify', `${bareUrl}/bare`);
    const auth = { 'x-api-key': key };
    const authOnly = await measure('auth only', `${appUrl}/bench/auth-only`, auth);
    const targets: Array<[string, string]> = [['business_accounts', '/api/v1/business-accounts/'], ['business_hours', '/api/v1/business-hours/']];
    for (const [metric, path] of targets) {
      const r = await measure(metric, `${appUrl}${path}`, auth);
      emit({
        bench: 'reads', metric: `${metric}_req_per_s`, value: Math.round(r.reqPerSec), unit: 'req/s',
        baseline: 'bare_fastify', baseline_value: Math.round(baseline.reqPerSec), ratio: round(r.reqPerSec / baseline.reqPerSec, 3), budget: 0.4,
      });
      emit({ bench: 'reads', metric: `${metric}_p99_ms`, value: r.p99, unit: 'ms', budget: 20, ok: r.p99 < 20 });
    }

    const withLimits: number[] = [];
    const withoutLimits: number[] = [];
    const runWith = async (i: number) =>
      withLimits.push((await measure(`business_accounts with rate limits (${i + 1}/${PAIRS})`, `${appUrl}/api/v1/business-accounts/`, auth, PAIR_S)).reqPerSec);
    const runWithout = async (i: number) =>
      withoutLimits.push((await measure(`business_accounts without rate limits (${i + 1}/${PAIRS})`, `${unlimitedUrl}/api/v1/business-accounts/`, auth, PAIR_S)).reqPerSec);
    for (let i = 0; i < PAIRS; i++) {
      if (i % 2 === 0) await runWithout(i).then(() => runWith(i));
      else await runWith(i).then(() => runWithout(i));
    }
    const ratio = median(withLimits.map((w, i) => w / withoutLimits[i]));
    const limited = median(withLimits);
    const free = median(withoutLimits);
    emit({
      bench: 'reads', metric: 'rate_limited_reads_per_s', value: Math.round(limited), unit: 'req/s',
      baseline: 'reads_without_rate_limit', baseline_value: Math.round(free), ratio: round(ratio, 3), budget: 0.9,
      runs: withLimits.map(Math.round), baseline_runs: withoutLimits.map(Math.round),
    });
    emit({
      bench: 'reads', metric: 'auth_only_req_per_s', value: Math.round(authOnly.reqPerSec), unit: 'req/s',
      baseline: 'bare_fastify', baseline_value: Math.round(baseline.reqPerSec), ratio: round(authOnly.reqPerSec / baseline.reqPerSec, 3),
    });
  } finally {
    await app.close();
    await unlimited.close();
    await bare.close();
    await services.runner.stop();
    await transport.close();
    await services.store.close();
    await db.close();
  }
}

main().catch((err) => {
  process.stderr.write(`bench reads failed: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
