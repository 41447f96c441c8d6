// Bulk sends (ARCHITECTURE section 13, docs/bulk.md "Performance"):
//  1. POST /api/v1/platform-templates/send-bulk/ with 100,000 recipients (a ~4 MB body, each with a variable) on a
//     TIER_UNLIMITED number, through the real app (auth, zod, validation of every recipient, 100 chunk appends,
//     the job, BulkSendCreated, and the wait for the bulk read model): creation latency.
//  2. The dispatcher (default options, one process, zero-latency sandbox, every projection running as in
//     `serve`): recipients dispatched per second, from the first claim to the last outcome (budget >= 2,000/s),
//     and the time from the 202 until the detail's progress_percentage is 100.
//  3. Tier pacing on the real clock: the mean gap between send starts on TIER_1000 (60 ms) and TIER_10000
//     (6 ms) numbers, as a ratio of the tier's spacing (budget: within 5%, reported as 1 - |ratio - 1| >= 0.95).
//  2b. The recipients' delivery statuses (delivered, then read: 200,000 records), handed to the delivery consumer's
//     batch handler in batches of 500 as its Kafka transport would: statuses applied per second until the bulk
//     read model shows every read (budget of the delivery consumer: >= 5,000/s).
// BENCH_BULK_RECIPIENTS overrides the 100,000.
import { SandboxProvider } from '../src/adapters/provider/sandbox';
import { seedFixture } from '../src/commands/provisioning/seed';
import { buildApp } from '../src/http/app';
import type { MessagingProvider, SendTemplateRequest } from '../src/ports/provider';
import { getBulkSend } from '../src/projections/bulk/queries';
import { BulkDispatcher } from '../src/workers/bulk-dispatcher';
import { createDeliveryBatchHandler } from '../src/workers/delivery-consumer';
import { asIncoming, benchDatabase, benchFixture, benchServices, emit, handOver, log, providerStatusRecords, round, closeBenchServices } from './support';

const RECIPIENTS = Number(process.env.BENCH_BULK_RECIPIENTS ?? 100_000);
/** records per call of the delivery consumer's batch handler (a Kafka batch) */
const STATUS_BATCH = 500;
const KEY = 'sbk_benchbulk0aaaaaaaaaaaaaaaaaaaaaa';
const NUMBERS = { unlimited: '900000000000101', tier1000: '900000000000102', tier10000: '900000000000103' };

const template = (id: number) => ({
  id, name: 'promo_update', language: 'es', category: 'MARKETING', status: 'APPROVED',
  variables: [{ name: 'name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' }], buttons: [],
});
const number = (id: number, phoneNumberId: string, tier: string) => ({
  id, phoneNumberId, displayPhoneNumber: `+54 11 0000-${id}`, verifiedName: 'Bench', businessName: 'Bench SA', isPrimary: id === 1,
  messagingLimitTier: tier, qualityRating: 'GREEN', templates: [template(id)],
});
const fixture = benchFixture(KEY, {
  phoneNumbers: [number(1, NUMBERS.unlimited, 'TIER_UNLIMITED'), number(2, NUMBERS.tier1000, 'TIER_1000'), number(3, NUMBERS.tier10000, 'TIER_10000')],
});

/** Records the real start time of every provider call per sending number. */
class Timed implements MessagingProvider {
  readonly kind = 'test' as const;
  readonly starts = new Map<string, number[]>();
  constructor(private readonly inner: SandboxProvider) {}
  sendTemplate(request: SendTemplateRequest) {
    if (request.phoneNumberId !== NUMBERS.unlimited) {
      let list = this.starts.get(request.phoneNumberId);
      if (!list) this.starts.set(request.phoneNumberId, (list = []));
      list.push(performance.now());
    }
    return this.inner.sendTemplate(request);
  }
}

const phone = (i: number) => `+5491150${String(i).padStart(6, '0')}`;

async function main(): Promise<void> {
  const db = await benchDatabase('bulk');
  const sandbox = new SandboxProvider({ delivery: 'off' });
  const provider = new Timed(sandbox);
  const services = benchServices(db, { provider });
  await services.runner.start();
  await seedFixture(services, fixture, { actor: 'bench' });
  const app = await buildApp(services);
  await app.ready();

  // 1. creation
  const recipients = Array.from({ length: RECIPIENTS }, (_, i) => ({ phone: phone(i), variables: { name: `Cliente ${i}` } }));
  const payload = JSON.stringify({ phone_number_id: NUMBERS.unlimited, template_name: 'promo_update', language: 'es', recipients });
  log(`bulk: POST send-bulk with ${RECIPIENTS} recipients (${round(payload.length / 1048576, 1)} MiB)`);
  const t0 = performance.now();
  const res = await app.inject({
    method: 'POST', url: '/api/v1/platform-templates/send-bulk/', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, payload,
  });
  const createdMs = performance.now() - t0;
  if (res.statusCode !== 202) throw new Error(`send-bulk answered ${res.statusCode}: ${res.body.slice(0, 500)}`);
  const bulkId = res.json().bulk_send_id as string;
  emit({ bench: 'bulk', metric: 'create_latency_ms', value: round(createdMs), unit: 'ms', recipients: RECIPIENTS });

  // 2. dispatch
  const dispatcher = new BulkDispatcher(services);
  const afterCreate = performance.now();
  dispatcher.start();
  const deadline = Date.now() + 200_000;
  let progress100Ms: number | undefined;
  let lastLog = 0;
  for (;;) {
    const b = await getBulkSend(db.pool, 1, bulkId);
    if (b && b.pendingCount === 0) {
      progress100Ms = performance.now() - afterCreate;
      break;
    }
    if (Date.now() - lastLog > 5000) {
      lastLog = Date.now();
      log(`bulk: ${b ? b.totalRecipients - b.pendingCount : 0}/${RECIPIENTS} in the read model (${b?.status})`);
    }
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const span = (await db.pool.query<{ first: Date; last: Date; n: number }>(
    `SELECT min(claimed_at) AS first, max(outcome_at) AS last, count(*)::int AS n FROM bulk_work.recipients
      WHERE bulk_id = $1 AND state IN ('sent', 'failed')`,
    [bulkId],
  )).rows[0];
  const dispatchS = (span.last.getTime() - span.first.getTime()) / 1000;
  emit({ bench: 'bulk', metric: 'dispatched_per_s', value: round(span.n / Math.max(0.001, dispatchS)), unit: 'recipients/s', budget: 2000, recipients: span.n, tier: 'TIER_UNLIMITED' });
  emit({
    bench: 'bulk', metric: 'progress_100_s', value: progress100Ms === undefined ? -1 : round(progress100Ms / 1000, 2), unit: 's',
    note: 'from the 202 until the detail shows progress_percentage 100 (all projections running)',
  });
  const final = await getBulkSend(db.pool, 1, bulkId);
  log(`bulk: ${final?.status}, sent ${final?.sentCount}, failed ${final?.failedCount}, sandbox accepted ${sandbox.acceptedCount}`);

  // 2b. the recipients' delivery statuses (delivered, then read) through the delivery consumer's batch handler
  const ids = (await db.pool.query<{ id: string }>(
    'SELECT provider_message_id AS id FROM rm_bulk.messages WHERE bulk_id = $1 AND provider_message_id IS NOT NULL ORDER BY idx', [bulkId],
  )).rows.map((r) => r.id);
  const statusRecords = asIncoming(providerStatusRecords(NUMBERS.unlimited, ids, ['delivered', 'read']));
  const statusHandler = createDeliveryBatchHandler(services);
  const statusStart = performance.now();
  for (let i = 0; i < statusRecords.length; i += STATUS_BATCH) await handOver(statusHandler, statusRecords.slice(i, i + STATUS_BATCH));
  for (let b = await getBulkSend(db.pool, 1, bulkId); b && b.readCount < ids.length; b = await getBulkSend(db.pool, 1, bulkId)) {
    if (Date.now() > deadline + 60_000) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const statusS = (performance.now() - statusStart) / 1000;
  const read = (await getBulkSend(db.pool, 1, bulkId))?.readCount ?? 0;
  emit({
    bench: 'bulk', metric: 'statuses_applied_per_s', value: round(statusRecords.length / statusS), unit: 'statuses/s', budget: 5000,
    ok: read === ids.length && statusRecords.length / statusS >= 5000, statuses: statusRecords.length, read_in_read_model: read,
    note: `batches of ${STATUS_BATCH} records through createDeliveryBatchHandler, until the bulk read model shows every read`,
  });

  // 3. tier pacing on the real clock
  for (const [phoneNumberId, tier, spacing, count] of [[NUMBERS.tier1000, 'TIER_1000', 60, 40], [NUMBERS.tier10000, 'TIER_10000', 6, 300]] as const) {
    const r = await app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send-bulk/', headers: { 'x-api-key': KEY },
      payload: { phone_number_id: phoneNumberId, template_name: 'promo_update', recipients: Array.from({ length: count }, (_, i) => ({ phone: phone(RECIPIENTS + i), variables: { name: 'x' } })) },
    });
    const id = r.json().bulk_send_id as string;
    for (let b = await getBulkSend(db.pool, 1, id); !b || b.pendingCount > 0; b = await getBulkSend(db.pool, 1, id)) {
      await new Promise((res2) => setTimeout(res2, 100));
    }
    const starts = provider.starts.get(phoneNumberId) ?? [];
    const mean = (starts[starts.length - 1] - starts[0]) / Math.max(1, starts.length - 1);
    const ratio = mean / spacing;
    emit({
      bench: 'bulk', metric: 'tier_spacing_ms', value: round(mean, 3), unit: 'ms', baseline: `${tier}_spacing`, baseline_value: spacing,
      ratio: round(ratio, 3), budget: 0.95, ok: Math.abs(ratio - 1) <= 0.05, sends: starts.length,
    });
  }

  await dispatcher.stop();
  await app.close();
  await closeBenchServices(services, sandbox, db);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
