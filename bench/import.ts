// Chat-message import throughput (`switchboard import-messages`, docs/export.md "Import throughput").
// Imports BENCH_IMPORT_LINES chat messages (default 20,000) over BENCH_IMPORT_CONVERSATIONS conversations (default
// 2,000) into a fresh database, in-process through `importMessages` (the CLI's code, with the CLI's pool sizes:
// 4 connections, 2 for the event store, the projection runner not running, the read model caught up at the end as
// the command does). The file is in time order, so every batch of 500 lines touches 500 conversations (contact
// messages in, AI-agent and operator replies out, 1 in 50 arriving deleted). Then the same file again (idempotent:
// every line unchanged). Both timed whole, the final read-model catch-up included.
// Stdout: `import_lines_per_s` and `reimport_lines_per_s` (lines/s); progress on stderr.
import { Readable } from 'node:stream';
import { createEventStorePool, createPool } from '../src/adapters/postgres/pool';
import { SandboxProvider } from '../src/adapters/provider/sandbox';
import { importMessages } from '../src/cli/import-messages';
import { seedFixture } from '../src/commands/provisioning/seed';
import { benchDatabase, benchFixture, benchServices, emit, log, round } from './support';

const LINES = Number(process.env.BENCH_IMPORT_LINES ?? 20_000);
const CONVERSATIONS = Number(process.env.BENCH_IMPORT_CONVERSATIONS ?? 2_000);
const KEY = 'sbk_benchimport00aaaaaaaaaaaaaaaaaaa';
const AGENT_ID = 7;
const OPERATOR_ID = 3;

const fixture = benchFixture(KEY, {
  agents: [{ id: AGENT_ID, name: 'Bench Bot', version: '1.0' }],
  operators: [{ id: OPERATOR_ID, name: 'Bench Operator' }],
});

/** Line k: conversation k mod CONVERSATIONS, its turn k div CONVERSATIONS (the file is in time order). */
function line(k: number): string {
  const conversation = k % CONVERSATIONS;
  const turn = Math.floor(k / CONVERSATIONS);
  const inbound = turn % 2 === 0;
  const byOperator = !inbound && turn % 6 === 5;
  return JSON.stringify({
    id: `import-msg-${conversation}-${turn}`,
    companyId: 1,
    conversationId: `import-conv-${conversation}`,
    occurredAt: new Date(Date.UTC(2025, 0, 1) + turn * 60_000 + conversation * 10).toISOString(),
    channel: 'PROVIDER_MSGAPP',
    direction: inbound ? 'inbound' : 'outbound',
    author: inbound ? { type: 'contact', contactId: conversation + 1 } : byOperator ? { type: 'human_operator', operatorId: OPERATOR_ID } : { type: 'agent', agentId: AGENT_ID },
    contactPhone: `+5491155${String(conversation).padStart(6, '0')}`,
    content: { type: 'text', text: inbound ? `Hola, mi pedido ${conversation}-${turn}?` : `Tu pedido ${conversation} llega mañana.`, mediaUrl: null, mediaMime: null },
    replyToMessageId: inbound ? null : `import-msg-${conversation}-${turn - 1}`,
    classifications: inbound || byOperator ? [] : [{ label: 'intent', value: 'order_status' }],
    extractions: inbound || byOperator ? [] : [{ key: 'order_id', value: `A-${conversation}` }],
    toolCalls: inbound || byOperator ? [] : [{ toolName: 'lookup_order', success: true, executionTimeMs: 12 }],
    traceId: inbound ? null : `trace-${conversation}-${turn}`,
    deleted: k % 50 === 49,
  });
}

async function main(): Promise<void> {
  const db = await benchDatabase('import');
  // the pools `switchboard import-messages` runs with (src/main.ts, role cli)
  const pool = createPool(db.url, 4);
  const storePool = createEventStorePool(db.url, 2);
  const sandbox = new SandboxProvider({ delivery: 'off' });
  const services = benchServices({ ...db, pool, storePool }, { provider: sandbox });
  const text = `${Array.from({ length: LINES }, (_, k) => line(k)).join('\n')}\n`;
  try {
    await services.runner.start();
    await seedFixture(services, fixture, { actor: 'bench' });
    await services.runner.catchUp();
    await services.runner.stop();
    for (const metric of ['import_lines_per_s', 'reimport_lines_per_s']) {
      const out: string[] = [];
      const started = performance.now();
      const summary = await importMessages(services, Readable.from([text]), { stdout: { write: (s: string) => out.push(s) }, stderr: process.stderr, progress: false });
      const seconds = (performance.now() - started) / 1000;
      const expected = metric === 'import_lines_per_s' ? summary.recorded : summary.unchanged;
      if (summary.rejected > 0 || expected !== LINES) throw new Error(`unexpected summary: ${out.join('').trim()}`);
      log(`import bench: ${metric}: ${out.join('').trim()} in ${round(seconds, 2)} s`);
      emit({ bench: 'import', metric, value: round(LINES / seconds), unit: 'lines/s', lines: LINES, conversations: CONVERSATIONS, seconds: round(seconds, 2) });
    }
  } finally {
    await services.runner.stop().catch(() => undefined);
    await sandbox.close();
    await services.transport.close();
    await services.store.close();
    await storePool.end();
    await pool.end();
    await db.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    log(`import bench failed: ${(err as Error)?.stack ?? String(err)}`);
    process.exit(1);
  },
);
