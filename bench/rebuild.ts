// Projection rebuild (ARCHITECTURE section 13: >= 20,000 events/s from the Postgres store; docs/core.md "Rebuild").
//  1. Fills the event log of a fresh database (embedded Postgres, or a fresh database in DATABASE_URL) with a
//     mix of the service's real write paths, called in-process (no HTTP), with the projection runner running as
//     in `serve` (so the live read models are built the way production builds them). The writers run at once,
//     so the log interleaves their events as a busy service's log does:
//       - single template sends (`sendTemplate`, 20 at a time): request, acceptance, outbound chat message;
//       - delivery statuses for every send (delivered, then read) through the delivery consumer's batch handler
//         (`createDeliveryBatchHandler`, the Kafka path of bench/sends.ts, handed batches of 500 records in-process);
//       - contact upserts (`upsertContact` of `parseUpsertBody` bodies, 10 at a time): new numbers (claim, create,
//         2 custom fields), then updates of existing ones (a custom field; every third also the name);
//       - chat messages through the conversation recorder (`ConversationRecorder.record`, 4 recorders at once, 100
//         messages per call over 50 open conversations): contact messages in, AI-agent replies (with classifications,
//         extractions, tool calls) and some operator replies out; 1 in 50 arrives deleted;
//       - one bulk send (`createBulkSend`) dispatched to the end by the bulk dispatcher (zero-latency sandbox),
//         then delivered + read statuses for its recipients through the same batch handler (its bulk lanes,
//         in random recipient order).
//  2. Waits until the runner has caught up, stops it, and for each projection of src/projections/registry.ts
//     takes the checksum of the live read model, runs `rebuildProjection` (replay from zero into a fresh schema,
//     analyze, swap; the whole call is timed, with nothing else running); the rebuilt read model must have the same
//     checksum (`checksumProjection`), else the line says `checksum_ok: false, ok: false` and the bench exits 1
//     after its cleanup.
// Stdout: one JSON line per projection (`<name>_events_per_s`: log events read per second, `applied`: events the
// projection handled) and one for the whole set (`all_projections_events_per_s`); progress on stderr.
// Knobs: BENCH_REBUILD_SENDS single sends (default 20,000; the other writers scale with it unless set):
// BENCH_REBUILD_CONTACTS new contacts, and as many updates of existing ones (default SENDS / 2);
// BENCH_REBUILD_MESSAGES chat messages (default 2 x SENDS); BENCH_REBUILD_BULK bulk recipients (default SENDS / 4).
// The defaults give a log of about 200,000 events.
import { createBulkSend } from '../src/commands/bulk/create';
import { isTerminal } from '../src/commands/bulk/decider';
import { upsertContact } from '../src/commands/contact/handler';
import { parseUpsertBody } from '../src/commands/contact/upsert-input';
import { ConversationRecorder } from '../src/commands/conversation/handler';
import { parseMessageRecord, type MessageRecordInput } from '../src/commands/conversation/message-input';
import type { MessageToRecord } from '../src/commands/conversation/decider';
import { seedFixture } from '../src/commands/provisioning/seed';
import { sendTemplate } from '../src/commands/send/send-template';
import { SandboxProvider } from '../src/adapters/provider/sandbox';
import { getBulkSend } from '../src/projections/bulk/queries';
import { checksumProjection, rebuildProjection } from '../src/projections/rebuild';
import { allProjections } from '../src/projections/registry';
import type { Services } from '../src/services';
import type { BatchHandler } from '../src/ports/transport';
import { BulkDispatcher } from '../src/workers/bulk-dispatcher';
import { createDeliveryBatchHandler } from '../src/workers/delivery-consumer';
import { asIncoming, BENCH_ORDER_TEMPLATE, benchDatabase, benchFixture, benchServices, emit, handOver, log, providerStatusRecords, round, runConcurrently } from './support';

const SENDS = Number(process.env.BENCH_REBUILD_SENDS ?? 20_000);
const CONTACTS = Number(process.env.BENCH_REBUILD_CONTACTS ?? Math.round(SENDS / 2));
const MESSAGES = Number(process.env.BENCH_REBUILD_MESSAGES ?? SENDS * 2);
const BULK = Number(process.env.BENCH_REBUILD_BULK ?? Math.round(SENDS / 4));
const BUDGET = 20_000;
const SEND_CONCURRENCY = 20;
const CONTACT_CONCURRENCY = 10;
const MESSAGE_LANES = 4;
const STATUS_BATCH_SENDS = 250; // 500 records (delivered + read) per batch handler call, as the Kafka consumer takes them
const KEY = 'sbk_benchrebuild0aaaaaaaaaaaaaaaaaaa';
const SEND_NUMBER = '900000000000201';
const BULK_NUMBER = '900000000000202';
const AGENT_ID = 7;
const OPERATOR_ID = 3;

const fixture = benchFixture(KEY, {
  contactLists: [{
    id: 1, name: 'All', isDefault: true,
    customFields: [
      { id: 1, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold'], required: false, group: null },
      { id: 2, key: 'visits', name: 'Visits', fieldType: 'int', options: null, required: false, group: null },
    ],
  }],
  phoneNumbers: [
    {
      id: 1, phoneNumberId: SEND_NUMBER, displayPhoneNumber: '+54 11 0000-0201', verifiedName: 'Bench', businessName: 'Bench SA',
      isPrimary: true, messagingLimitTier: 'TIER_UNLIMITED', qualityRating: 'GREEN',
      templates: [BENCH_ORDER_TEMPLATE],
    },
    {
      id: 2, phoneNumberId: BULK_NUMBER, displayPhoneNumber: '+54 11 0000-0202', verifiedName: 'Bench', businessName: 'Bench SA',
      isPrimary: false, messagingLimitTier: 'TIER_UNLIMITED', qualityRating: 'GREEN',
      templates: [{
        id: 2, name: 'promo_update', language: 'es', category: 'MARKETING', status: 'APPROVED',
        variables: [{ name: 'name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' }], buttons: [],
      }],
    },
  ],
  agents: [{ id: AGENT_ID, name: 'Bench Bot', version: '1.0' }],
  operators: [{ id: OPERATOR_ID, name: 'Bench Operator' }],
});

// numbers ending in 1: never one ending in 0000 (the sandbox refuses those with 131026)
const contactPhone = (i: number) => `+549114${String(i * 10 + 1).padStart(7, '0')}`;
const otherPhone = (i: number) => `+54911${String(20_000_000 + i * 10 + 1)}`;
const bulkPhone = (i: number) => `+5491150${String(i * 10 + 1).padStart(7, '0')}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The chat message `k` of the recorder lane: 50 conversations open at a time, 20 messages each, interleaved. */
function chatMessage(k: number): MessageToRecord {
  const wave = Math.floor(k / 1000);
  const j = k % 1000;
  const conversation = wave * 50 + (j % 50);
  const turn = Math.floor(j / 50);
  const contact = conversation % Math.max(1, CONTACTS);
  const inbound = turn % 2 === 0;
  const byOperator = !inbound && turn % 6 === 5;
  const id = `bench-msg-${conversation}-${turn}`;
  const record: MessageRecordInput = {
    id,
    companyId: 1,
    conversationId: `bench-conv-${conversation}`,
    occurredAt: new Date(Date.UTC(2025, 0, 1) + conversation * 3_600_000 + turn * 30_000).toISOString(),
    channel: 'PROVIDER_MSGAPP',
    direction: inbound ? 'inbound' : 'outbound',
    author: inbound ? { type: 'contact', contactId: contact + 1 } : byOperator ? { type: 'human_operator', operatorId: OPERATOR_ID } : { type: 'agent', agentId: AGENT_ID },
    contactPhone: contactPhone(contact),
    content: {
      type: 'text',
      text: inbound ? `Hola, quiero saber el estado de mi pedido ${conversation}-${turn}` : `Tu pedido ${conversation} está en camino y llega mañana entre las 9 y las 13 hs.`,
      mediaUrl: null,
      mediaMime: null,
    },
    replyToMessageId: inbound ? null : `bench-msg-${conversation}-${turn - 1}`,
    classifications: inbound || byOperator ? [] : [{ label: 'intent', value: 'order_status' }],
    extractions: inbound || byOperator ? [] : [{ key: 'order_id', value: `A-${conversation}` }],
    toolCalls: inbound || byOperator ? [] : [{ toolName: 'lookup_order', success: true, executionTimeMs: 12 }],
    traceId: inbound ? null : `trace-${conversation}-${turn}`,
    deleted: k % 50 === 49,
  };
  const parsed = parseMessageRecord(record);
  if (!parsed.ok) throw new Error(`bench message ${id} is invalid: ${parsed.reason}`);
  return parsed.message;
}

async function fill(services: Services, sandbox: SandboxProvider): Promise<void> {
  const started = performance.now();
  const counts = { sends: 0, statuses: 0, contactsNew: 0, contactsUpdated: 0, messages: 0, bulkStatuses: 0 };
  const progress = setInterval(() => {
    log(`rebuild bench: ${round((performance.now() - started) / 1000)} s: sends ${counts.sends}/${SENDS}, statuses ${counts.statuses}/${SENDS * 2}, ` +
      `contacts ${counts.contactsNew}+${counts.contactsUpdated}/${CONTACTS * 2}, messages ${counts.messages}/${MESSAGES}, bulk statuses ${counts.bulkStatuses}/${BULK * 2}`);
  }, 5000);
  try {
    // the bulk send first: the dispatcher works through it while the other writers run
    const dispatcher = new BulkDispatcher(services);
    let bulkId: string | undefined;
    if (BULK > 0) {
      const created = await createBulkSend(services, {
        companyId: 1, actor: 'bench', userId: 1, phoneNumberId: BULK_NUMBER, templateName: 'promo_update', language: 'es',
        recipients: Array.from({ length: BULK }, (_, i) => ({ phone: bulkPhone(i), variables: { name: `Cliente ${i}` } })),
      });
      bulkId = created.bulkId;
      dispatcher.start();
    }

    const statusHandler = createDeliveryBatchHandler(services);
    let offset = 0;
    const statusRecords = (phoneNumberId: string, ids: readonly string[]) => {
      const records = asIncoming(providerStatusRecords(phoneNumberId, ids, ['delivered', 'read']), undefined, offset);
      offset += records.length;
      return records;
    };
    const accepted: string[] = [];
    let sendsDone = false;

    const sends = (async () => {
      try {
        await runConcurrently(SENDS, SEND_CONCURRENCY, async (i) => {
          const out = await sendTemplate(services, {
            companyId: 1, actor: 'bench', phoneNumberId: SEND_NUMBER, templateName: 'order_update', language: 'es',
            // every other send goes to a contact's number
            recipientPhone: i % 2 === 0 && CONTACTS > 0 ? contactPhone((i / 2) % CONTACTS) : otherPhone(i),
            variables: { name: 'Ana', total: { amount: 1234.5, code: 'ARS' } },
            buttonVariables: { button_0: `ORD-${i}` },
          });
          accepted.push(out.providerMessageId);
          counts.sends++;
        });
      } finally {
        sendsDone = true;
      }
    })();

    const statuses = (async () => {
      for (;;) {
        if (accepted.length >= STATUS_BATCH_SENDS || (sendsDone && accepted.length > 0)) {
          counts.statuses += await handOver(statusHandler, statusRecords(SEND_NUMBER, accepted.splice(0, STATUS_BATCH_SENDS)));
        } else if (sendsDone) {
          return;
        } else {
          await sleep(20);
        }
      }
    })();

    const contacts = (async () => {
      const upsert = (body: unknown) => upsertContact(services, 1, parseUpsertBody(body), { actor: 'bench', companyId: 1 });
      await runConcurrently(CONTACTS, CONTACT_CONCURRENCY, async (i) => {
        await upsert({
          phone: contactPhone(i), full_name: `Contact ${i}`, source: 'api',
          custom_fields: [{ key: 'plan', value: [i % 3 === 0 ? 'gold' : 'basic'] }, { key: 'visits', value: [1] }],
        });
        counts.contactsNew++;
      });
      // existing numbers (in another order than they were created)
      await runConcurrently(CONTACTS, CONTACT_CONCURRENCY, async (i) => {
        const n = (i * 7919) % CONTACTS;
        await upsert({
          phone: contactPhone(n), custom_fields: [{ key: 'visits', value: [2 + i] }], ...(i % 3 === 0 ? { full_name: `Contact ${n} (${i})` } : {}),
        });
        counts.contactsUpdated++;
      });
    })();

    // MESSAGE_LANES recorders at once, each on its own waves of conversations (streams are not shared)
    const waves = Math.ceil(MESSAGES / 1000);
    const messages = Promise.all(Array.from({ length: MESSAGE_LANES }, async (_, lane) => {
      const recorder = new ConversationRecorder(services);
      for (let wave = lane; wave < waves; wave += MESSAGE_LANES) {
        for (let k = wave * 1000; k < Math.min(MESSAGES, (wave + 1) * 1000); k += 100) {
          const batch = Array.from({ length: Math.min(100, MESSAGES - k) }, (_, x) => chatMessage(k + x));
          const { outcomes } = await recorder.record(batch, { actor: 'bench' });
          const rejected = outcomes.find((o) => o.status === 'rejected');
          if (rejected) throw new Error(`a chat message was rejected: ${JSON.stringify(rejected)}`);
          counts.messages += batch.length;
        }
      }
    }));

    // the bulk send dispatched to the end, then delivery statuses of its recipients through the delivery consumer's
    // batch handler (its bulk lanes), in no particular order of the recipients, as the provider sends them
    const bulk = (async () => {
      if (!bulkId) return;
      const deadline = Date.now() + 120_000;
      for (;;) {
        const b = await getBulkSend(services.pool, 1, bulkId);
        if (b && b.pendingCount === 0 && isTerminal(b.status)) {
          log(`rebuild bench: bulk send ${b.status} (${b.sentCount} sent, ${b.failedCount} failed) at ${round((performance.now() - started) / 1000)} s`);
          break;
        }
        if (Date.now() > deadline) throw new Error(`the bulk send did not finish in time (${b?.status}, ${b?.pendingCount} pending)`);
        await sleep(100);
      }
      await dispatcher.stop();
      const ids = (await services.pool.query<{ id: string }>(
        `SELECT provider_message_id AS id FROM rm_bulk.messages WHERE bulk_id = $1 AND provider_message_id IS NOT NULL ORDER BY md5(provider_message_id)`, [bulkId],
      )).rows.map((r) => r.id);
      const t = performance.now();
      for (let i = 0; i < ids.length; i += STATUS_BATCH_SENDS) {
        counts.bulkStatuses += await handOver(statusHandler, statusRecords(BULK_NUMBER, ids.slice(i, i + STATUS_BATCH_SENDS)));
      }
      log(`rebuild bench: ${counts.bulkStatuses} statuses of bulk recipients applied in ${round((performance.now() - t) / 1000, 2)} s`);
    })();

    try {
      await Promise.all([sends, statuses, contacts, messages, bulk]);
    } finally {
      await dispatcher.stop();
    }
    log(`rebuild bench: log filled in ${round((performance.now() - started) / 1000)} s: ${counts.sends} sends (sandbox accepted ${sandbox.acceptedCount}), ` +
      `${counts.statuses} statuses, ${counts.contactsNew} new + ${counts.contactsUpdated} updated contacts, ${counts.messages} chat messages, ` +
      `bulk of ${BULK} with ${counts.bulkStatuses} statuses`);
  } finally {
    clearInterval(progress);
  }
}

async function main(): Promise<void> {
  const db = await benchDatabase('rebuild');
  const sandbox = new SandboxProvider({ delivery: 'off' });
  const services = benchServices(db, { provider: sandbox });
  let failed = false;
  try {
    await services.runner.start();
    await seedFixture(services, fixture, { actor: 'bench' });
    log(`rebuild bench: filling the log (${SENDS} sends, ${CONTACTS} contacts, ${MESSAGES} chat messages, bulk of ${BULK})`);
    await fill(services, sandbox);

    const t0 = performance.now();
    await services.runner.catchUp();
    await services.runner.stop();
    log(`rebuild bench: runner caught up and stopped (${round((performance.now() - t0) / 1000, 2)} s)`);
    const byType = (await db.pool.query<{ type: string; n: number }>(
      'SELECT type, count(*)::int AS n FROM es.events GROUP BY type ORDER BY count(*) DESC, type',
    )).rows;
    const total = byType.reduce((n, r) => n + r.n, 0);
    log(`rebuild bench: ${total} events in the log: ${byType.map((r) => `${r.type} ${r.n}`).join(', ')}`);

    let allRead = 0;
    let allSeconds = 0;
    let allOk = true;
    for (const p of allProjections) {
      const before = await checksumProjection(db.pool, p);
      let lastLog = 0;
      const started = performance.now();
      const result = await rebuildProjection(db.pool, services.store, p, {
        onProgress: (r) => {
          if (performance.now() - lastLog < 5000) return;
          lastLog = performance.now();
          log(`rebuilding ${p.name}: ${r.read} read, ${r.applied} applied`);
        },
      });
      const seconds = (performance.now() - started) / 1000;
      const after = await checksumProjection(db.pool, p);
      const checksumOk = after === before;
      if (!checksumOk) {
        failed = true;
        log(`rebuild bench: the rebuilt ${p.name} read model differs from the live one\n  live:    ${before}\n  rebuilt: ${after}`);
      }
      const value = round(result.read / Math.max(seconds, 0.001));
      allRead += result.read;
      allSeconds += seconds;
      allOk &&= checksumOk;
      emit({
        bench: 'rebuild', metric: `${p.name}_events_per_s`, value, unit: 'events/s', events: result.read, applied: result.applied,
        seconds: round(seconds, 2), budget: BUDGET, ok: value >= BUDGET && checksumOk, checksum_ok: checksumOk,
      });
    }
    const value = round(allRead / Math.max(allSeconds, 0.001));
    emit({
      bench: 'rebuild', metric: 'all_projections_events_per_s', value, unit: 'events/s', events: allRead, seconds: round(allSeconds, 2),
      budget: BUDGET, ok: value >= BUDGET && allOk, checksum_ok: allOk, projections: allProjections.length, log_events: total,
    });
  } finally {
    await services.runner.stop().catch(() => undefined);
    await sandbox.close();
    await services.transport.close();
    await services.store.close();
    await db.close();
  }
  if (failed) throw new Error('a rebuilt read model differs from the live one (see above)');
}

main().then(
  () => process.exit(0),
  (err) => {
    log(`rebuild bench failed: ${(err as Error)?.stack ?? err}`);
    process.exit(1);
  },
);
