import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestApp } from '../support/services';
import { insertSyntheticRows, issueKey, provisionCompany, settle } from '../support/conversation-fixtures';

// Memory bound of the export (ARCHITECTURE 13: "memory flat in the number of rows"): 1,000,000 rows paged
// through 10,000 at a time over real HTTP must not grow this process's RSS by 100 MB or more. The rows are
// inserted straight into the read model: this is a memory test, not an ingestion test, and not a timing test.

const ROWS = 1_000_000;
const LIMIT = 10_000;
const BUDGET_BYTES = 100 * 1024 * 1024;
const GLOBAL = 'sbk_global_memorytest0000000000000000';

interface PageResult {
  rows: number;
  next: string | undefined;
}

/** One page over HTTP, counting lines as they stream by (nothing is kept but the last line). */
function streamPage(base: string, query: Record<string, string>): Promise<PageResult> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}/api/v1/qualitative-export/messages?${new URLSearchParams(query)}`, { headers: { 'x-api-key': GLOBAL } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`status ${res.statusCode}`));
        res.resume();
        return;
      }
      let lines = 0;
      let tail: Buffer = Buffer.alloc(0);
      res.on('data', (chunk: Buffer) => {
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
        tail = chunk.length >= 2048 ? chunk.subarray(chunk.length - 2048) : Buffer.concat([tail, chunk]).subarray(-2048);
      });
      res.on('end', () => {
        const last = tail.toString('utf8').trimEnd().split('\n').at(-1) ?? '';
        if (last.startsWith('{"_error"')) return reject(new Error(last));
        if (last.startsWith('{"_truncated"')) return resolve({ rows: lines - 1, next: JSON.parse(last).next_cursor });
        resolve({ rows: lines, next: undefined });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

// About a minute on 2 cores (most of it inserting the rows): run with `npm run test:memory`.
const d = process.env.SWITCHBOARD_MEMORY_TEST ? describe : describe.skip;
if (!process.env.SWITCHBOARD_MEMORY_TEST) console.warn('export memory test skipped: run it with `npm run test:memory` (SWITCHBOARD_MEMORY_TEST=1)');

d('export memory', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp();
    await provisionCompany(t.services, { companyId: 901 });
    await issueKey(t.services, GLOBAL, null);
    await settle(t.services);
    // 1,000,000 rows over 30 days
    await insertSyntheticRows(t.services.pool, { companyId: 901, count: ROWS, start: '2024-03-01T00:00:00Z', stepMs: 2_500 });
    await t.services.pool.query('ANALYZE rm_conversations.messages');
    await t.app.listen({ port: 0, host: '127.0.0.1' });
  }, 300_000);
  afterAll(async () => {
    await t?.close();
  });

  it(`pages through ${ROWS} rows (${LIMIT} per page) with RSS growth under 100 MB`, async () => {
    const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const query = { company_id: '901', from: '2024-03-01T00:00:00Z', to: '2024-03-31T00:00:00Z', limit: String(LIMIT), include: 'classifications,extractions,tool_calls,trace_id' };
    // warm up (JIT, pools, sockets), then measure from here
    await streamPage(base, { ...query, limit: '100' });
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    let peakDetail = process.memoryUsage();
    const sampler = setInterval(() => {
      const m = process.memoryUsage();
      if (m.rss > peak) {
        peak = m.rss;
        peakDetail = m;
      }
    }, 25);
    let total = 0;
    let pages = 0;
    let cursor: string | undefined;
    try {
      do {
        const page = await streamPage(base, cursor ? { ...query, cursor } : query);
        total += page.rows;
        pages++;
        cursor = page.next;
        peak = Math.max(peak, process.memoryUsage().rss);
      } while (cursor);
    } finally {
      clearInterval(sampler);
    }
    const growthMb = (peak - baseline) / 1024 / 1024;
    process.stderr.write(`[export-memory] ${total} rows in ${pages} pages; RSS baseline ${(baseline / 1048576).toFixed(0)} MB, peak ${(peak / 1048576).toFixed(0)} MB, growth ${growthMb.toFixed(1)} MB; at peak ${JSON.stringify(Object.fromEntries(Object.entries(peakDetail).map(([k, v]) => [k, Math.round(v / 1048576)])))}\n`);
    expect(total).toBe(ROWS);
    expect(pages).toBe(ROWS / LIMIT);
    expect(peak - baseline).toBeLessThan(BUDGET_BYTES);
  }, 600_000);
});
