// Export streaming throughput (ARCHITECTURE 13): rows/s of GET /api/v1/qualitative-export/messages (limit
// 10000, every include, paging with cursors, over HTTP on 127.0.0.1) beside `COPY (SELECT row_to_json(m) …)
// TO STDOUT` of the same rows, measured in the same run, alternating. Budget: ratio ≥ 0.5. Also reports the
// process's RSS growth while exporting (memory flat in the number of rows).
//   BENCH_EXPORT_ROWS (default 200000), BENCH_EXPORT_ROUNDS (default 5)
import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { to as copyTo } from 'pg-copy-streams';
import { buildApp } from '../src/http/app';
import { apiKeysProjection } from '../src/projections/apikeys/projection';
import { conversationsProjection } from '../src/projections/conversations/projection';
import { hashApiKey, keyIdFromHash } from '../src/shared/api-key';
import { BENCH_PEPPER, benchDatabase, benchServices, emit, log, round } from './support';

const ROWS = Number(process.env.BENCH_EXPORT_ROWS ?? 200_000);
const ROUNDS = Number(process.env.BENCH_EXPORT_ROUNDS ?? 5);
const LIMIT = 10_000;
const GLOBAL_KEY = 'sbk_global_benchexport000000000000000';
const COMPANY = 1;
const FROM = '2024-03-01T00:00:00Z';
const TO = '2024-03-31T00:00:00Z';

function countNewlines(buf: Buffer): number {
  let n = 0;
  for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) n++;
  return n;
}

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

/** One page over HTTP, lines counted as they stream by. */
function page(base: string, cursor: string | undefined): Promise<{ rows: number; bytes: number; next?: string }> {
  const query = new URLSearchParams({
    company_id: String(COMPANY), from: FROM, to: TO, limit: String(LIMIT), include: 'classifications,extractions,tool_calls,trace_id',
    ...(cursor ? { cursor } : {}),
  });
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}/api/v1/qualitative-export/messages?${query}`, { agent, headers: { 'x-api-key': GLOBAL_KEY } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
      let lines = 0;
      let bytes = 0;
      let tail: Buffer = Buffer.alloc(0);
      res.on('data', (chunk: Buffer) => {
        lines += countNewlines(chunk);
        bytes += chunk.length;
        tail = chunk.length >= 2048 ? chunk.subarray(chunk.length - 2048) : Buffer.concat([tail, chunk]).subarray(-2048);
      });
      res.on('end', () => {
        const last = tail.toString('utf8').trimEnd().split('\n').at(-1) ?? '';
        if (last.startsWith('{"_error"')) return reject(new Error(last));
        if (last.startsWith('{"_truncated"')) return resolve({ rows: lines - 1, bytes, next: JSON.parse(last).next_cursor });
        resolve({ rows: lines, bytes });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function main(): Promise<void> {
  const db = await benchDatabase('export');
  const services = benchServices(db);
  await services.runner.prepare();
  const app = await buildApp(services);
  try {
    const keyHash = hashApiKey(BENCH_PEPPER, GLOBAL_KEY);
    const keyId = keyIdFromHash(keyHash);
    const id = randomUUID();
    await services.store.append(`apikey-${keyId}`, [{
      type: 'ApiKeyIssued',
      data: { keyId, scope: 'global', companyId: null, userId: null, name: 'bench', keyHash, expiresAt: null },
      metadata: { eventId: id, correlationId: id, causationId: null, companyId: null, actor: 'bench', at: new Date().toISOString() },
    }], 'no_stream');
    while ((await services.runner.runBatch(apiKeysProjection)) !== 0);
    while ((await services.runner.runBatch(conversationsProjection)) !== 0);

    log(`export: inserting ${ROWS} rows into the read model`);
    await db.pool.query(
      `INSERT INTO rm_conversations.messages (company_id, message_id, seq, conversation_id, occurred_at, channel, direction, author_type,
         author_contact_id, author_agent_id, author_operator_id, contact_phone, agent_name, agent_version, content_type, content_text,
         media_url, media_mime, reply_to_message_id, classifications, extractions, tool_calls, trace_id)
       SELECT $1, 'wamid.HBgN' || lpad(i::text, 12, '0'), i, 'conv-' || (i / 20), $2::timestamptz + i * ($3 * interval '1 millisecond'),
              (ARRAY['PROVIDER_MSGAPP','MSGAPP_GATEWAY','PHOTOAPP','SOCIALMSG','FLOWTOOL_MSGAPP','FLOWTOOL_PHOTOAPP'])[1 + i % 6],
              CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, CASE WHEN i % 2 = 0 THEN 'contact' ELSE 'agent' END,
              CASE WHEN i % 2 = 0 THEN 1000 + i % 5000 END, CASE WHEN i % 2 = 1 THEN 7 END, NULL,
              CASE WHEN i % 2 = 0 THEN '+5491100000000' END, CASE WHEN i % 2 = 1 THEN 'Asistente de ventas' END, CASE WHEN i % 2 = 1 THEN '2.3.1' END,
              'text', 'Hola, quiero saber el estado de mi pedido numero ' || i || ', gracias',
              NULL, NULL, CASE WHEN i % 3 = 0 THEN 'wamid.HBgN' || lpad((i - 1)::text, 12, '0') END,
              '[{"label":"intent","value":"order_status"},{"label":"sentiment","value":0.82}]', '[{"key":"order_id","value":"A-1234"}]',
              '[{"tool_name":"lookup_order","success":true,"execution_time_ms":120}]', CASE WHEN i % 2 = 1 THEN 'trace-' || md5(i::text) END
         FROM generate_series(1, $4::int) i`,
      [COMPANY, FROM, Math.floor((29 * 86_400_000) / ROWS), ROWS],
    );
    await db.pool.query('ANALYZE rm_conversations.messages');

    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

    const endpointPass = async () => {
      let rows = 0;
      let bytes = 0;
      let pages = 0;
      let cursor: string | undefined;
      const t0 = process.hrtime.bigint();
      do {
        const p = await page(base, cursor);
        rows += p.rows;
        bytes += p.bytes;
        pages++;
        cursor = p.next;
      } while (cursor);
      const s = Number(process.hrtime.bigint() - t0) / 1e9;
      if (rows !== ROWS) throw new Error(`the endpoint returned ${rows} rows, expected ${ROWS}`);
      return { rowsPerS: rows / s, bytes, pages, s };
    };

    const copyPass = async () => {
      const client = await db.pool.connect();
      try {
        const t0 = process.hrtime.bigint();
        let rows = 0;
        let bytes = 0;
        const stream = client.query(copyTo(
          `COPY (SELECT row_to_json(m) FROM rm_conversations.messages m
                  WHERE m.company_id = ${COMPANY} AND m.occurred_at >= '${FROM}' AND m.occurred_at < '${TO}' AND NOT m.deleted
                  ORDER BY m.occurred_at, m.message_id) TO STDOUT`,
        ));
        await new Promise<void>((resolve, reject) => {
          stream.on('data', (chunk: Buffer) => {
            rows += countNewlines(chunk);
            bytes += chunk.length;
          });
          stream.on('end', resolve);
          stream.on('error', reject);
        });
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        if (rows !== ROWS) throw new Error(`COPY returned ${rows} rows, expected ${ROWS}`);
        return { rowsPerS: rows / s, bytes, s };
      } finally {
        client.release();
      }
    };

    log('export: warm-up');
    await endpointPass();
    await copyPass();

    const rssBase = process.memoryUsage().rss;
    let rssPeak = rssBase;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    }, 25);
    const endpoint: number[] = [];
    const copy: number[] = [];
    const ratios: number[] = [];
    let pages = 0;
    let endpointBytes = 0;
    let copyBytes = 0;
    try {
      for (let r = 0; r < ROUNDS; r++) {
        // alternate which goes first; each round's pair runs back to back, so its ratio sees the same machine
        const first = r % 2 === 0 ? await endpointPass() : await copyPass();
        const second = r % 2 === 0 ? await copyPass() : await endpointPass();
        const e = (r % 2 === 0 ? first : second) as Awaited<ReturnType<typeof endpointPass>>;
        const c = r % 2 === 0 ? second : first;
        endpoint.push(e.rowsPerS);
        copy.push(c.rowsPerS);
        ratios.push(e.rowsPerS / c.rowsPerS);
        pages = e.pages;
        endpointBytes = e.bytes;
        copyBytes = c.bytes;
        log(`export: round ${r + 1}: endpoint ${Math.round(e.rowsPerS)} rows/s (${e.s.toFixed(2)} s), COPY ${Math.round(c.rowsPerS)} rows/s (${c.s.toFixed(2)} s), ratio ${(e.rowsPerS / c.rowsPerS).toFixed(3)}`);
      }
    } finally {
      clearInterval(sampler);
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const value = Math.round(median(endpoint));
    const baselineValue = Math.round(median(copy));
    emit({
      bench: 'export', metric: 'rows_per_s', value, unit: 'rows/s', baseline: 'copy_to_stdout', baseline_value: baselineValue,
      // the median of the per-round ratios (each pair measured back to back): steadier than a ratio of medians on a busy machine
      ratio: round(median(ratios), 3), budget: 0.5, rows: ROWS, pages, limit: LIMIT, rounds: ROUNDS,
      bytes_per_row: Math.round(endpointBytes / ROWS), copy_bytes_per_row: Math.round(copyBytes / ROWS),
    });
    const growth = round((rssPeak - rssBase) / 1048576, 1);
    emit({ bench: 'export', metric: 'rss_growth_mb', value: growth, unit: 'MB', budget: 100, ok: growth < 100, rows_exported: ROWS * ROUNDS });
  } finally {
    agent.destroy();
    await app.close();
    await services.store.close();
    await db.close();
  }
}

main().catch((err) => {
  process.stderr.write(`bench export failed: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
