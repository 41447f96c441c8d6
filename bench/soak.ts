// Soak (issue #8, `npm run bench:soak`; docs/reliability.md): the service (HTTP + projection runner + workers,
// in-process transport, sandbox provider, embedded or DATABASE_URL Postgres, listening on 127.0.0.1 only) runs in a
// forked child, so the RSS and live-heap samples it reports are the service's alone; this process is the load
// generator and the client webhook receiver. For SOAK_SECONDS (default 600) SOAK_CONCURRENCY loops mix single sends
// (a sixth of them with an Idempotency-Key, each sent twice), bulk creations, contact upserts (a third of them with
// a key, each sent twice), lookups, exports and signed webhooks (each status sent twice, in shuffled order), with one
// client webhook endpoint subscribed to every event type on a local receiver, and the rate limiter on. Emits JSON
// lines: throughput, p50/p99 per endpoint, answers by status, the service's RSS and heap over time, then the
// consistency checks: one outcome per bulk recipient, each (message, status) recorded at most once and every sent
// `read` applied, every keyed repeat the replay of its first answer, every client webhook event received with a
// valid signature, projections equal to a fresh rebuild. `GET /metrics` is scraped every 15 s, as Prometheus would
// (its answers, and the gauges' peaks), and once after the load, where the counters must agree with what the load
// generator and the receiver saw. The receiver answers 429 with Retry-After for 2 s of every minute.
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'pg';
import { Webhook } from 'standardwebhooks';
import { InProcessTransport } from '../src/adapters/in-process/transport';
import { seedFixture } from '../src/commands/provisioning/seed';
import { buildApp } from '../src/http/app';
import { checksumProjection, rebuildProjection } from '../src/projections/rebuild';
import { allProjections } from '../src/projections/registry';
import { signWebhook, statusWebhook } from '../src/shared/provider-webhook';
import { WEBHOOK_EVENT_TYPES } from '../src/events/webhooks';
import { startWorkers } from '../src/workers';
import { benchDatabase, benchServices, emit, exited, log, nextMessage, round, runForkedBench } from './support';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 8);
/** seconds of every minute the client webhook receiver answers 429 with Retry-After: 1 */
const THROTTLE_S = 2;
const KEY = 'sbk_soak0000aaaaaaaaaaaaaaaaaaaaaaaaa';
const NUMBER = '910000000000001';
const APP_SECRET = 'soak-app-secret';

const fixture = {
  companies: [{
    id: 1, name: 'Soak Co', email: 's@soak.example', phone: '+541100000000', website: 'https://soak.example', address: 'x',
    description: 'soak', timezone: 'America/Argentina/Buenos_Aires', companySize: 'SMALL', companyTypes: ['ECOMMERCE'], categories: [],
    users: [{ id: 1, email: 'ops@soak.example', first_name: 'O', last_name: 'P' }],
    apiKeys: [{ name: 'soak', key: KEY, userId: 1, active: true, expiresAt: null }],
    contactLists: [{ id: 1, name: 'All', isDefault: true, customFields: [
      { id: 1, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold'], required: false, group: null },
    ] }],
    contacts: [], branches: [], holidays: [], agents: [], operators: [],
    phoneNumbers: [{
      id: 1, phoneNumberId: NUMBER, displayPhoneNumber: '+54 11 0000-0001', verifiedName: 'Soak', businessName: 'Soak SA',
      isPrimary: true, messagingLimitTier: 'TIER_UNLIMITED', qualityRating: 'GREEN',
      templates: [{ id: 1, name: 'welcome', language: 'es', category: 'MARKETING', status: 'APPROVED', variables: [], buttons: [] }],
    }],
  }],
  globalKeys: [],
};

type Kind = 'send' | 'keyed_send' | 'bulk' | 'upsert' | 'keyed_upsert' | 'lookup' | 'contact_get' | 'export' | 'webhook' | 'bulk_detail';
const lat = new Map<Kind, number[]>();
const byStatus = new Map<string, number>();
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

type ToChild = { type: 'load-ended' } | { type: 'stop' };
type Sample = { t: number; mb: number };
type FromChild =
  | { type: 'ready'; url: string; databaseUrl: string }
  | { type: 'stopped'; rss: Sample[]; heap: Sample[]; differing: number; projections: number }
  | { type: 'error'; message: string };

// ---- child: the service --------------------------------------------------------------------------------------

async function server(): Promise<void> {
  const send = (m: FromChild) => process.send!(m);
  const db = await benchDatabase('soak');
  const transport = new InProcessTransport();
  const services = benchServices(db, {
    // the client webhook receiver is plain HTTP on loopback: allowed by the operator settings the tests use
    env: { PROVIDER_APP_SECRET: APP_SECRET, PROVIDER_VERIFY_TOKEN: 'soak', WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true',
      RATE_LIMIT_PER_MINUTE: '60000' }, // the service's default limit (the other benches raise it)
    transport,
  });
  await services.runner.start();
  await seedFixture(services, fixture, { actor: 'soak' });
  const workers = await startWorkers(services, { role: 'serve' });
  const app = await buildApp(services);
  const address = await app.listen({ host: '127.0.0.1', port: 0 });

  // this process's RSS every 10 s, and its live heap after a full collection once a minute (RSS also holds garbage
  // not yet collected): what a leak grows; both while the load runs
  const started = Date.now();
  const rss: Sample[] = [];
  const heap: Sample[] = [];
  const at = () => Math.round((Date.now() - started) / 1000);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) log('soak: the service runs without --expose-gc: no heap samples');
  const samplers = [
    setInterval(() => rss.push({ t: at(), mb: round(process.memoryUsage().rss / 1048576) }), 10_000),
    setInterval(() => {
      if (!gc) return;
      gc();
      heap.push({ t: at(), mb: round(process.memoryUsage().heapUsed / 1048576) });
    }, 60_000),
  ];
  const stopSampling = () => samplers.forEach(clearInterval);

  process.on('message', (m: ToChild) => {
    if (m.type === 'load-ended') stopSampling();
    if (m.type !== 'stop') return;
    void (async () => {
      stopSampling();
      await app.close();
      await workers.stop();
      await services.runner.stop();
      let differing = 0;
      for (const p of allProjections) {
        const before = await checksumProjection(db.pool, p);
        await rebuildProjection(db.pool, services.store, p, {});
        const after = await checksumProjection(db.pool, p);
        if (before !== after) {
          differing++;
          log(`projection ${p.name} differs from a fresh rebuild`);
        }
      }
      await transport.close();
      await services.store.close();
      await db.close();
      process.send!({ type: 'stopped', rss, heap, differing, projections: allProjections.length } satisfies FromChild, () => process.exit(0));
    })().catch((err) => {
      send({ type: 'error', message: String((err as Error)?.stack ?? err) });
      process.exit(1);
    });
  });
  send({ type: 'ready', url: address, databaseUrl: db.url });
}

// ---- parent: load generator, client webhook receiver, checks ------------------------------------------------

async function main(): Promise<void> {
  const child = fork(__filename, ['serve'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv: ['--expose-gc'] });
  try {
    await soak(child);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}

async function soak(child: ReturnType<typeof fork>): Promise<void> {
  const { url: address, databaseUrl } = await nextMessage<FromChild, 'ready'>(child, 'ready');
  const db = { pool: new Pool({ connectionString: databaseUrl, max: 2 }) };
  log(`soak: ${SECONDS} s, ${CONCURRENCY} loops against ${address} (the service in process ${child.pid})`);

  // the client's webhook receiver: every event's webhook-id, and whether each arrival's signature verified. For the
  // first THROTTLE_S of every minute it answers 429 with Retry-After: 1 (a rate-limited client): the sender pauses
  // the endpoint and retries those deliveries, and none may be lost
  let verifier: Webhook | undefined;
  const webhookIdsReceived = new Map<string, number>();
  let badSignatures = 0;
  let throttledAnswers = 0;
  const receiverStarted = Date.now();
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (((Date.now() - receiverStarted) / 1000) % 60 < THROTTLE_S) {
        throttledAnswers++;
        res.writeHead(429, { 'retry-after': '1' });
        return void res.end();
      }
      const id = String(req.headers['webhook-id']);
      try {
        verifier!.verify(Buffer.concat(chunks).toString('utf8'), req.headers as Record<string, string>);
      } catch {
        badSignatures++;
      }
      webhookIdsReceived.set(id, (webhookIdsReceived.get(id) ?? 0) + 1);
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const created = await fetch(`${address}/api/v1/webhook-endpoints/`, {
    method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`, event_types: WEBHOOK_EVENT_TYPES }),
  });
  if (created.status !== 201) throw new Error(`webhook endpoint: ${created.status} ${await created.text()}`);
  const endpoint = (await created.json()) as { id: string; secret: string };
  verifier = new Webhook(endpoint.secret);

  const messages: string[] = [];
  const readSent = new Set<string>();
  const bulks: string[] = [];
  let seq = 0;
  const call = async (kind: Kind, method: string, path: string, body?: string, headers: Record<string, string> = {}) => {
    const t0 = performance.now();
    let status = 'error';
    let text = '';
    let replayed: string | null = null;
    try {
      const res = await fetch(`${address}${path}`, {
        method, body, signal: AbortSignal.timeout(60_000),
        headers: { 'x-api-key': KEY, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
      });
      text = await res.text();
      status = String(res.status);
      replayed = res.headers.get('idempotent-replayed');
    } catch (err) {
      status = `error:${(err as Error).name}`;
    }
    (lat.get(kind) ?? lat.set(kind, []).get(kind)!).push(performance.now() - t0);
    const k = `${kind} ${status}`;
    byStatus.set(k, (byStatus.get(k) ?? 0) + 1);
    return { status, text, replayed };
  };
  let keyedRepeats = 0;
  let keyedMismatches = 0;
  // keyed upserts: their record is the generic one, kept sealed in public.idempotency_keys (docs/idempotency.md)
  let keyedUpsertRepeats = 0;
  let keyedUpsertMismatches = 0;
  /** a keyed request and its repeat: whether the repeat is the replay of the first answer */
  const sentTwice = async (kind: Kind, url: string, body: string, key: string) => {
    const first = await call(kind, 'POST', url, body, { 'idempotency-key': key });
    const repeat = await call(kind, 'POST', url, body, { 'idempotency-key': key });
    const replayed = repeat.status === first.status && repeat.text === first.text && (!first.status.startsWith('2') || repeat.replayed === 'true');
    return { first, replayed };
  };
  const phone = (n: number) => `+54911${String(10_000_000 + (n % 5_000_000)).padStart(8, '0')}`;
  const webhook = async (ids: string[]) => {
    const at = Math.floor(Date.now() / 1000);
    const notes = ids.flatMap((id) => (['delivered', 'read'] as const).map((status, k) => ({ phoneNumberId: NUMBER, providerMessageId: id, status, timestamp: String(at + k), recipientId: '5491100000000' })));
    const batch = [...notes, ...notes].sort(() => Math.random() - 0.5); // duplicates and reordering
    const raw = JSON.stringify(statusWebhook(batch));
    const r = await call('webhook', 'POST', '/webhooks/provider', raw, { 'x-hub-signature-256': signWebhook(APP_SECRET, raw) });
    if (r.status === '200') for (const id of ids) readSent.add(id);
  };

  // an operator's Prometheus: /metrics (no key) every 15 s; the samples of each scrape by series
  const scrapes = { count: 0, failed: 0, projectionFailing: 0, maxProjectionLag: 0, maxFanOutLag: 0, maxOldestDue: 0 };
  const scrapeMetrics = async (): Promise<Map<string, number>> => {
    const samples = new Map<string, number>();
    scrapes.count++;
    try {
      const res = await fetch(`${address}/metrics`, { signal: AbortSignal.timeout(10_000) });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`status ${res.status}`);
      for (const line of text.split('\n')) {
        const m = /^(switchboard_\S+) (\S+)$/.exec(line);
        if (m) samples.set(m[1], Number(m[2]));
      }
    } catch {
      scrapes.failed++;
      return samples;
    }
    const of = (prefix: string) => [...samples].filter(([k]) => k.startsWith(prefix)).map(([, v]) => v);
    scrapes.projectionFailing += of('switchboard_projection_failing{').reduce((a, b) => a + b, 0);
    scrapes.maxProjectionLag = Math.max(scrapes.maxProjectionLag, ...of('switchboard_projection_lag_seconds{'));
    scrapes.maxFanOutLag = Math.max(scrapes.maxFanOutLag, ...of('switchboard_webhook_fanout_lag_seconds'));
    scrapes.maxOldestDue = Math.max(scrapes.maxOldestDue, ...of('switchboard_webhook_oldest_due_seconds'));
    return samples;
  };
  const scraper = setInterval(() => void scrapeMetrics(), 15_000);

  const started = Date.now();
  const deadline = started + SECONDS * 1000;
  const loop = async () => {
    while (Date.now() < deadline) {
      const n = seq++;
      const r = n % 20;
      if (r === 5) {
        const body = JSON.stringify({ phone_number_id: NUMBER, template_name: 'welcome', recipient_phone: phone(n) });
        const { first, replayed } = await sentTwice('keyed_send', '/api/v1/platform-templates/send/', body, `soak-${n}`);
        keyedRepeats++;
        if (!replayed) keyedMismatches++;
        if (first.status === '200') messages.push(JSON.parse(first.text).message_id);
      } else if (r < 6) {
        const res = await call('send', 'POST', '/api/v1/platform-templates/send/', JSON.stringify({ phone_number_id: NUMBER, template_name: 'welcome', recipient_phone: phone(n) }));
        if (res.status === '200') messages.push(JSON.parse(res.text).message_id);
      } else if (r === 6) {
        const recipients = Array.from({ length: 20 }, (_, i) => ({ phone: phone(n * 20 + i) }));
        recipients.push(recipients[0]); // a duplicate, removed by the service
        const res = await call('bulk', 'POST', '/api/v1/platform-templates/send-bulk/', JSON.stringify({ phone_number_id: NUMBER, template_name: 'welcome', recipients }));
        if (res.status === '202') bulks.push(JSON.parse(res.text).bulk_send_id);
      } else if (r === 9) {
        const body = JSON.stringify({ phone: phone(n % 500), full_name: `Soak ${n % 500}`, custom_fields: [{ key: 'plan', value: [n % 2 ? 'gold' : 'basic'] }] });
        const { replayed } = await sentTwice('keyed_upsert', '/api/v1/external/contacts/upsert/', body, `soak-upsert-${n}`);
        keyedUpsertRepeats++;
        if (!replayed) keyedUpsertMismatches++;
      } else if (r < 9) {
        await call('upsert', 'POST', '/api/v1/external/contacts/upsert/', JSON.stringify({ phone: phone(n % 500), full_name: `Soak ${n % 500}`, custom_fields: [{ key: 'plan', value: [n % 2 ? 'gold' : 'basic'] }] }));
      } else if (r < 13) {
        await call('lookup', 'GET', `/api/v1/contact-lookup/?phone=${encodeURIComponent(phone(n % 500))}`);
      } else if (r === 13) {
        await call('contact_get', 'GET', `/api/v1/external/contacts/?phone=${encodeURIComponent(phone(n % 500))}`);
      } else if (r === 14) {
        const to = new Date();
        const from = new Date(to.getTime() - 7 * 86_400_000);
        await call('export', 'GET', `/api/v1/qualitative-export/messages?company_id=1&from=${from.toISOString()}&to=${to.toISOString()}&limit=100`);
      } else if (r === 15 && bulks.length) {
        await call('bulk_detail', 'GET', `/api/v1/platform-templates/bulk-sends/${bulks[n % bulks.length]}/`);
      } else if (messages.length >= 4) {
        await webhook(messages.splice(0, 4));
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  child.send({ type: 'load-ended' } satisfies ToChild);
  const elapsed = (Date.now() - started) / 1000;
  if (messages.length) await webhook(messages.splice(0));

  // settle: bulks finished, every `read` sent applied (bounded)
  const settleDeadline = Date.now() + 300_000;
  const unfinished = async () => (await db.pool.query(`SELECT count(*)::int AS n FROM rm_bulk.bulk_sends WHERE status NOT IN ('COMPLETED','PARTIAL','FAILED','CANCELLED')`).catch(() => ({ rows: [{ n: -1 }] }))).rows[0].n;
  const unread = async () => (await db.pool.query(`SELECT count(*)::int AS n FROM unnest($1::text[]) id WHERE NOT EXISTS (SELECT 1 FROM es.events e WHERE e.type = 'DeliveryStatusRecorded' AND e.data->>'providerMessageId' = id AND e.data->>'status' = 'read')`, [[...readSent]])).rows[0].n;
  const undelivered = async () => (await db.pool.query(`SELECT count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 AND status <> 'succeeded'`, [endpoint.id])).rows[0].n;
  while (Date.now() < settleDeadline && ((await unfinished()) !== 0 || (await unread()) !== 0 || (await undelivered()) !== 0)) await new Promise((r) => setTimeout(r, 500));

  const requests = [...byStatus.values()].reduce((a, b) => a + b, 0);
  const fivexx = [...byStatus].filter(([k]) => / (5\d\d|error)/.test(k)).reduce((a, [, v]) => a + v, 0);
  emit({ bench: 'soak', metric: 'requests', value: requests, unit: 'requests', seconds: round(elapsed), concurrency: CONCURRENCY });
  emit({ bench: 'soak', metric: 'throughput', value: round(requests / elapsed), unit: 'req/s' });
  emit({ bench: 'soak', metric: '5xx_or_transport_errors', value: fivexx, unit: 'requests', budget: 0, ok: fivexx === 0 });
  emit({ bench: 'soak', metric: 'answers_by_status', value: requests, unit: 'requests', by_status: Object.fromEntries([...byStatus].sort()) });
  for (const [kind, xs] of [...lat].sort()) {
    emit({ bench: 'soak', metric: `${kind}_p50`, value: round(pct(xs, 50), 2), unit: 'ms', count: xs.length });
    emit({ bench: 'soak', metric: `${kind}_p99`, value: round(pct(xs, 99), 2), unit: 'ms', count: xs.length });
  }
  // consistency
  const bulkRecipients = await db.pool.query<{ expected: number; outcomes: number; dup: number }>(`
    WITH o AS (SELECT e.data->>'bulkId' AS bulk, (r->>'index')::int AS idx, count(*) AS n FROM es.events e, jsonb_array_elements(e.data->'recipients') r
                WHERE e.type IN ('BulkRecipientsDispatched','BulkRecipientsRejected') GROUP BY 1, 2)
    SELECT (SELECT coalesce(sum(total_unique), 0)::int FROM (SELECT (data->>'uniqueRecipients')::int AS total_unique FROM es.events WHERE type = 'BulkSendCreated') x) AS expected,
           (SELECT count(*)::int FROM o) AS outcomes, (SELECT count(*)::int FROM o WHERE n > 1) AS dup`).catch(async () => {
    const r = await db.pool.query<{ outcomes: number; dup: number }>(`WITH o AS (SELECT e.data->>'bulkId' AS bulk, (r->>'index')::int AS idx, count(*) AS n FROM es.events e, jsonb_array_elements(e.data->'recipients') r
                WHERE e.type IN ('BulkRecipientsDispatched','BulkRecipientsRejected') GROUP BY 1, 2) SELECT count(*)::int AS outcomes, count(*) FILTER (WHERE n > 1)::int AS dup FROM o`);
    return { rows: [{ expected: -1, ...r.rows[0] }] };
  });
  const br = bulkRecipients.rows[0];
  const statusDup = (await db.pool.query(`SELECT count(*)::int AS n FROM (SELECT 1 FROM es.events WHERE type = 'DeliveryStatusRecorded' GROUP BY data->>'providerMessageId', data->>'status' HAVING count(*) > 1) x`)).rows[0].n;
  const lost = await unread();
  const notFinished = await unfinished();
  emit({ bench: 'soak', metric: 'bulk_recipients_duplicated_outcomes', value: br.dup, unit: 'recipients', budget: 0, ok: br.dup === 0, bulks: bulks.length, outcomes: br.outcomes, expected: br.expected, unfinished_bulks: notFinished });
  emit({ bench: 'soak', metric: 'bulk_recipients_without_outcome', value: br.expected >= 0 ? br.expected - br.outcomes : -1, unit: 'recipients', budget: 0, ok: br.expected === br.outcomes });
  emit({ bench: 'soak', metric: 'webhook_statuses_duplicated', value: statusDup, unit: 'statuses', budget: 0, ok: statusDup === 0 });
  emit({ bench: 'soak', metric: 'webhook_reads_lost', value: lost, unit: 'messages', budget: 0, ok: lost === 0, reads_sent: readSent.size });
  emit({
    bench: 'soak', metric: 'keyed_repeats_not_replayed', value: keyedMismatches + keyedUpsertMismatches, unit: 'requests', budget: 0,
    ok: keyedMismatches + keyedUpsertMismatches === 0, keyed_repeats: keyedRepeats, keyed_upsert_repeats: keyedUpsertRepeats, upserts_not_replayed: keyedUpsertMismatches,
  });
  // every client webhook event the fan-out queued for the endpoint arrived, signed; extra arrivals are retries
  // (at least once), reported, not failed
  const queued = (await db.pool.query<{ webhook_id: string; status: string }>(`SELECT webhook_id, status FROM webhooks.deliveries WHERE endpoint_id = $1`, [endpoint.id])).rows;
  const missing = queued.filter((d) => !webhookIdsReceived.has(d.webhook_id)).length;
  const byType = (await db.pool.query<{ event_type: string; n: number }>(`SELECT event_type, count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 GROUP BY 1 ORDER BY 1`, [endpoint.id])).rows;
  emit({
    bench: 'soak', metric: 'client_webhooks_lost', value: missing, unit: 'events', budget: 0, ok: missing === 0 && queued.length > 0,
    queued: queued.length, not_succeeded: queued.filter((d) => d.status !== 'succeeded').length, received: webhookIdsReceived.size,
    received_more_than_once: [...webhookIdsReceived.values()].filter((c) => c > 1).length, by_type: Object.fromEntries(byType.map((r) => [r.event_type, r.n])),
    throttled_answers: throttledAnswers,
  });
  emit({ bench: 'soak', metric: 'client_webhook_bad_signatures', value: badSignatures, unit: 'requests', budget: 0, ok: badSignatures === 0 });
  // the counters after the load, against what this process saw: every delivery that succeeded had a successful
  // attempt (more when a success was sent again), and every keyed repeat was counted as a replay
  clearInterval(scraper);
  const final = await scrapeMetrics();
  const successAttempts = final.get('switchboard_webhook_attempts_total{outcome="success"}') ?? 0;
  const succeeded = queued.filter((d) => d.status === 'succeeded').length;
  const replays = final.get('switchboard_idempotent_replays_total{route="/api/v1/platform-templates/send/"}') ?? 0;
  const upsertReplays = final.get('switchboard_idempotent_replays_total{route="/api/v1/external/contacts/upsert/"}') ?? 0;
  emit({ bench: 'soak', metric: 'metrics_scrapes_failed', value: scrapes.failed, unit: 'scrapes', budget: 0, ok: scrapes.failed === 0, scrapes: scrapes.count });
  emit({ bench: 'soak', metric: 'metrics_projection_failing_seen', value: scrapes.projectionFailing, unit: 'samples', budget: 0, ok: scrapes.projectionFailing === 0 });
  emit({
    bench: 'soak', metric: 'metrics_peaks', value: round(scrapes.maxProjectionLag, 2), unit: 's',
    projection_lag_s: round(scrapes.maxProjectionLag, 2), fanout_lag_s: round(scrapes.maxFanOutLag, 2), oldest_due_s: round(scrapes.maxOldestDue, 2),
  });
  emit({
    bench: 'soak', metric: 'metrics_webhook_successes_below_succeeded', value: Math.max(0, succeeded - successAttempts), unit: 'deliveries', budget: 0,
    ok: successAttempts >= succeeded && succeeded > 0, success_attempts: successAttempts, succeeded, received: [...webhookIdsReceived.values()].reduce((a, b) => a + b, 0),
  });
  emit({
    bench: 'soak', metric: 'metrics_keyed_replays_miscounted', value: Math.abs(replays - keyedRepeats) + Math.abs(upsertReplays - keyedUpsertRepeats), unit: 'requests', budget: 0,
    ok: replays === keyedRepeats && upsertReplays === keyedUpsertRepeats, replays, keyed_repeats: keyedRepeats, upsert_replays: upsertReplays, keyed_upsert_repeats: keyedUpsertRepeats,
  });

  await new Promise<void>((r) => receiver.close(() => r()));
  await db.pool.end();
  child.send({ type: 'stop' } satisfies ToChild);
  const service = await nextMessage<FromChild, 'stopped'>(child, 'stopped');
  await exited(child, 60_000);
  emit({ bench: 'soak', metric: 'rss_max', value: Math.max(0, ...service.rss.map((x) => x.mb)), unit: 'MB', samples: service.rss });
  // the service's process alone (the load generator and the receiver run in this one)
  emit({ bench: 'soak', metric: 'heap_after_gc_last', value: service.heap.at(-1)?.mb ?? -1, unit: 'MB', samples: service.heap });
  emit({ bench: 'soak', metric: 'projections_differing_from_rebuild', value: service.differing, unit: 'projections', budget: 0, ok: service.differing === 0, projections: service.projections });
}

runForkedBench('soak', server, main);
