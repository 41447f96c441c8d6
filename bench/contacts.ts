// Contacts (ARCHITECTURE section 13), against the real HTTP server on 127.0.0.1 (embedded Postgres, or a fresh
// database in DATABASE_URL), with autocannon, 20 connections. The servers run in a forked child process and
// autocannon in this one, so load generator and server do not share an event loop:
//  1. baseline: a bare fastify route (GET returning a constant) in the same child process and run;
//  2. GET /api/v1/contact-lookup/ over existing contacts (auth + one read-model query): lookups/s as a ratio of the
//     baseline (budget >= 0.4) and p99 (budget < 20 ms); GET /api/v1/external/contacts/ reported the same way;
//  3. POST /api/v1/external/contacts/upsert/ of new numbers (claim + create + 2 custom-field versions + wait for
//     the read model): upserts/s (budget >= 1000/s) and p99 (budget < 50 ms);
//  4. the same for existing numbers, each request changing a custom field (a version appended every time).
import Fastify from 'fastify';
import { upsertContact } from '../src/commands/contact/handler';
import { parseUpsertBody } from '../src/commands/contact/upsert-input';
import { seedFixture } from '../src/commands/provisioning/seed';
import { buildApp } from '../src/http/app';
import { autocannon, benchDatabase, benchFixture, type CannonResult, benchServices, emit, exited, forkServer, log, median, nextMessage, round, runForkedBench } from './support';

// autocannon ships no type declarations: the slice of its result this bench reads

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const EXISTING = Number(process.env.BENCH_CONTACTS ?? 2000);
const KEY = 'sbk_benchcontacts0aaaaaaaaaaaaaaaaaa';

const fixture = benchFixture(KEY, {
  contactLists: [{
    id: 1, name: 'All', isDefault: true,
    customFields: [
      { id: 1, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold'], required: false, group: null },
      { id: 2, key: 'visits', name: 'Visits', fieldType: 'int', options: null, required: false, group: null },
      { id: 3, key: 'tags', name: 'Tags', fieldType: 'multiselector', options: ['a', 'b', 'c'], required: false, group: null },
      { id: 4, key: 'note', name: 'Note', fieldType: 'text', options: null, required: false, group: null },
    ],
  }],
});

/** BENCH_ONLY=lookup,get,new,existing runs a subset (profiling) */
const ONLY = (process.env.BENCH_ONLY ?? '').split(',').filter(Boolean);
const phase = (name: string) => ONLY.length === 0 || ONLY.includes(name);

const existingPhone = (i: number) => `+549114${String(i).padStart(7, '0')}`;
const newPhone = (i: number) => `+549113${String(i).padStart(7, '0')}`;

type FromChild = { type: 'ready'; url: string; bareUrl: string } | { type: 'stopped' } | { type: 'error'; message: string };

// ---- child: the servers (the API on the bench database, and the bare fastify baseline) -------------------

async function server(): Promise<void> {
  const send = (m: FromChild) => process.send!(m);
  const db = await benchDatabase('contacts');
  const services = benchServices(db);
  await services.runner.start();
  await seedFixture(services, fixture, { actor: 'bench' });

  log(`contacts bench: creating ${EXISTING} contacts`);
  for (let i = 0; i < EXISTING; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, EXISTING - i) }, (_, j) =>
      upsertContact(services, 1, parseUpsertBody({
        phone: existingPhone(i + j), full_name: `Contact ${i + j}`, custom_fields: [{ key: 'plan', value: ['gold'] }, { key: 'visits', value: [1] }],
      }), { actor: 'bench', companyId: 1 })));
  }

  const app = await buildApp(services);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const bareApp = Fastify({ logger: false });
  bareApp.get('/bare', async () => ({ found: false, contact: null }));
  const bareUrl = await bareApp.listen({ port: 0, host: '127.0.0.1' });
  process.on('message', (m: { type: 'stop' }) => {
    if (m.type !== 'stop') return;
    void (async () => {
      try {
        await bareApp.close();
        await app.close();
        await services.runner.stop();
        await services.store.close();
        await db.close();
        send({ type: 'stopped' });
        process.exit(0);
      } catch (err) {
        send({ type: 'error', message: (err as Error)?.stack ?? String(err) });
      }
    })();
  });
  send({ type: 'ready', url, bareUrl });
}

// ---- parent: load generator --------------------------------------------------------------------------

async function main(): Promise<void> {
  const child = forkServer(__filename);
  try {
    const { url, bareUrl } = await nextMessage<FromChild, 'ready'>(child, 'ready');
    await measure(url, bareUrl);
    child.send({ type: 'stop' });
    await nextMessage<FromChild, 'stopped'>(child, 'stopped');
    await exited(child);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}

async function measure(url: string, bareUrl: string): Promise<void> {
  log(`contacts bench: server ${url}, bare ${bareUrl}, ${CONNECTIONS} connections, ${DURATION_S} s per run`);

  const get = (base: string, path: () => string, duration = DURATION_S) => autocannon({
    url: base, connections: CONNECTIONS, duration, headers: { 'x-api-key': KEY },
    requests: [{ setupRequest: (req: Record<string, unknown>) => ({ ...req, path: path() }) }],
  });
  const post = (body: () => string, duration = DURATION_S) => autocannon({
    url: `${url}/api/v1/external/contacts/upsert/`, connections: CONNECTIONS, duration, method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    requests: [{ setupRequest: (req: Record<string, unknown>) => ({ ...req, body: body() }) }],
  });

  let k = 0;
  const lookupPath = () => `/api/v1/contact-lookup/?phone=${encodeURIComponent(existingPhone(k++ % EXISTING))}`;
  const getPath = () => `/api/v1/external/contacts/?phone=${encodeURIComponent(existingPhone(k++ % EXISTING))}`;

  log('warm-up (2 s each)');
  await get(bareUrl, () => '/bare', 2);
  await get(url, lookupPath, 2);

  // The machine may be shared: each measurement is repeated ROUNDS times, interleaved with its baseline, and
  // the medians are reported (the ratio compares medians measured side by side).
  const rounds = (names: string[]) => Object.fromEntries(names.map((n) => [n, [] as CannonResult[]]));
  const rate = (r: CannonResult) => r['2xx'] / (r.duration || DURATION_S);
  const summary = (name: string, rs: CannonResult[]) => {
    const rates = rs.map(rate);
    const p99s = rs.map((r) => r.latency.p99);
    const bad = rs.reduce((n, r) => n + r.non2xx + r.errors + r.timeouts, 0);
    log(`${name}: rates ${rates.map((x) => round(x)).join(', ')} /s; p99 ${p99s.join(', ')} ms; p50 ${rs.map((r) => r.latency.p50).join(', ')} ms; non-2xx/errors ${bad}`);
    return { rate: median(rates), p99: median(p99s), p50: median(rs.map((r) => r.latency.p50)), bad };
  };

  const reads = rounds(['bare', 'lookup', 'get']);
  for (let i = 0; i < ROUNDS; i++) {
    reads.bare.push(await get(bareUrl, () => '/bare'));
    if (phase('lookup')) reads.lookup.push(await get(url, lookupPath));
    if (phase('get')) reads.get.push(await get(url, getPath));
  }
  const bare = summary('bare fastify route', reads.bare);
  if (phase('lookup')) {
    const s = summary('contact lookup', reads.lookup);
    emit({
      bench: 'contacts', metric: 'lookups_per_s', value: round(s.rate), unit: 'req/s', baseline: 'bare_fastify_route',
      baseline_value: round(bare.rate), budget: 0.4, connections: CONNECTIONS, rounds: ROUNDS, non_2xx: s.bad,
    });
    emit({ bench: 'contacts', metric: 'lookup_p99_ms', value: round(s.p99, 2), unit: 'ms', budget: 20, p50_ms: s.p50 });
  }
  if (phase('get')) {
    const s = summary('external contact get', reads.get);
    emit({
      bench: 'contacts', metric: 'external_gets_per_s', value: round(s.rate), unit: 'req/s', baseline: 'bare_fastify_route',
      baseline_value: round(bare.rate), budget: 0.4, connections: CONNECTIONS, rounds: ROUNDS, non_2xx: s.bad,
    });
    emit({ bench: 'contacts', metric: 'external_get_p99_ms', value: round(s.p99, 2), unit: 'ms', budget: 20, p50_ms: s.p50 });
  }

  let n = 0;
  const newBody = () => JSON.stringify({
    phone: newPhone(++n), full_name: `New ${n}`, custom_fields: [{ key: 'plan', value: ['basic'] }, { key: 'visits', value: [n] }],
  });
  let m = 0;
  const existingBody = () => {
    const i = m++;
    return JSON.stringify({ phone: existingPhone(i % EXISTING), custom_fields: [{ key: 'visits', value: [1000 + i] }] });
  };
  const writes = rounds(['new', 'existing']);
  if (phase('new') || phase('existing')) {
    // as the sends bench: the write path runs before it is measured (compiled code, prepared statements, plans)
    log('warm-up of the upserts (2 s of new numbers)');
    await post(newBody, 2);
  }
  for (let i = 0; i < ROUNDS; i++) {
    if (phase('new')) writes.new.push(await post(newBody));
    if (phase('existing')) writes.existing.push(await post(existingBody));
  }
  if (phase('new')) {
    const s = summary('upsert new numbers', writes.new);
    emit({ bench: 'contacts', metric: 'upserts_new_per_s', value: round(s.rate), unit: 'upserts/s', budget: 1000, connections: CONNECTIONS, rounds: ROUNDS, non_2xx: s.bad });
    emit({ bench: 'contacts', metric: 'upsert_new_p99_ms', value: round(s.p99, 2), unit: 'ms', budget: 50, p50_ms: s.p50 });
  }
  if (phase('existing')) {
    const s = summary('upsert existing numbers', writes.existing);
    emit({ bench: 'contacts', metric: 'upserts_existing_per_s', value: round(s.rate), unit: 'upserts/s', budget: 1000, connections: CONNECTIONS, rounds: ROUNDS, non_2xx: s.bad });
    emit({ bench: 'contacts', metric: 'upsert_existing_p99_ms', value: round(s.p99, 2), unit: 'ms', budget: 50, p50_ms: s.p50 });
  }

}

runForkedBench('contacts', server, main);
