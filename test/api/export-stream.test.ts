import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestApp } from '../support/services';
import { insertSyntheticRows, issueKey, messageRecord, ndjson, provisionCompany, recordMessages, settle } from '../support/conversation-fixtures';

// The export as a stream: snapshot paging while messages are recorded, a failure after the first byte, and the
// database client given back when the HTTP client goes away.

const GLOBAL = 'sbk_global_exportstream00000000000000';
const PATH = '/api/v1/qualitative-export/messages';

type TestApp = Awaited<ReturnType<typeof createTestApp>>;

function get(t: TestApp, query: Record<string, string>) {
  return t.app.inject({ method: 'GET', url: PATH, query, headers: { 'x-api-key': GLOBAL } });
}

async function page(t: TestApp, query: Record<string, string>): Promise<{ rows: any[]; next: string | undefined }> {
  const res = await get(t, query);
  expect(res.statusCode).toBe(200);
  const lines = ndjson(res.body);
  const last = lines.at(-1);
  if (last && '_truncated' in last) return { rows: lines.slice(0, -1), next: last.next_cursor };
  return { rows: lines, next: undefined };
}

/** Real HTTP on 127.0.0.1 (inject buffers whole responses; these tests need a socket). */
function open(base: string, query: Record<string, string>): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${PATH}?${new URLSearchParams(query)}`, { headers: { 'x-api-key': GLOBAL } }, resolve);
    req.on('error', reject);
    req.end();
  });
}

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Backends of this database holding an export cursor open. */
async function openExportTransactions(t: TestApp): Promise<number> {
  const r = await t.services.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid()
        AND state LIKE 'idle in transaction%' AND (query LIKE 'FETCH%export_rows%' OR query LIKE 'DECLARE export_rows%')`,
  );
  return r.rows[0].n;
}

describe('export stream', () => {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    t = await createTestApp();
    await provisionCompany(t.services, { companyId: 301, agents: [{ id: 7, name: 'Bot', version: '1' }] });
    await provisionCompany(t.services, { companyId: 302 });
    await provisionCompany(t.services, { companyId: 303 });
    await issueKey(t.services, GLOBAL, null);
    await settle(t.services);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('paging is a snapshot of the first page: rows recorded meanwhile (before or after the cursor) are not mixed in, deleted ones drop out', async () => {
    const at = (m: string) => `2024-05-01T10:${m}:00.000Z`;
    await recordMessages(t.services, ['00', '10', '20', '30'].map((m) => messageRecord({ companyId: 301, id: `snap-${m}`, conversationId: 'snap', occurredAt: at(m) })));
    await settle(t.services);
    const q = { company_id: '301', from: '2024-05-01T00:00:00Z', to: '2024-05-02T00:00:00Z' };
    const first = await page(t, { ...q, limit: '2' });
    expect(first.rows.map((r) => r.occurred_at)).toEqual([at('00'), at('10')]);

    await recordMessages(t.services, [
      messageRecord({ companyId: 301, id: 'snap-05', conversationId: 'snap', occurredAt: at('05') }), // before the cursor
      messageRecord({ companyId: 301, id: 'snap-25', conversationId: 'snap', occurredAt: at('25') }), // after the cursor
      messageRecord({ companyId: 301, id: 'snap-30', conversationId: 'snap', occurredAt: at('30'), deleted: true }), // deleted now
    ]);
    await settle(t.services);

    const second = await page(t, { ...q, limit: '2', cursor: first.next! });
    expect(second.rows.map((r) => r.occurred_at)).toEqual([at('20')]);
    expect(second.next).toBeUndefined();

    // a new export sees everything recorded so far
    const fresh = await page(t, q);
    expect(fresh.rows.map((r) => r.occurred_at)).toEqual([at('00'), at('05'), at('10'), at('20'), at('25')]);
  });

  it('every row of the snapshot exactly once while messages are being recorded concurrently', async () => {
    const q = { company_id: '302,303', from: '2024-06-01T00:00:00Z', to: '2024-06-08T00:00:00Z' };
    const minute = (n: number) => new Date(Date.parse('2024-06-01T00:00:00Z') + n * 60_000).toISOString();
    const initial = Array.from({ length: 60 }, (_, i) =>
      messageRecord({ companyId: 302 + (i % 2), id: `conc-${i}`, conversationId: `conc-${i % 4}`, occurredAt: minute(i * 10) }));
    await recordMessages(t.services, initial);
    await settle(t.services);
    const snapshot = (await page(t, q)).rows.map((r) => r.message_id);
    expect(snapshot).toHaveLength(60);

    let stop = false;
    let n = 0;
    const writer = (async () => {
      while (!stop) {
        const k = n++;
        // anywhere in the range: before and after whatever the cursor is at
        await recordMessages(t.services, [messageRecord({ companyId: 302 + (k % 2), id: `late-${k}`, conversationId: 'late', occurredAt: minute((k * 37) % 600) })]);
      }
    })();
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const p = await page(t, { ...q, limit: '7', ...(cursor ? { cursor } : {}) });
      seen.push(...p.rows.map((r) => r.message_id));
      cursor = p.next;
      await new Promise((r) => setTimeout(r, 20));
    } while (cursor);
    stop = true;
    await writer;
    expect(n).toBeGreaterThan(0);
    expect(seen).toEqual(snapshot);
    await settle(t.services);
    expect((await page(t, q)).rows).toHaveLength(60 + n);
  });

  it('gives the database client back when the HTTP client disconnects mid-stream', async () => {
    await insertSyntheticRows(t.services.pool, { companyId: 302, count: 30_000, start: '2024-07-01T00:00:00Z', stepMs: 1000, textBytes: 2000, prefix: 'disc-' });
    const before = await openExportTransactions(t);
    expect(before).toBe(0);
    const res = await open(base, { company_id: '302', from: '2024-07-01T00:00:00Z', to: '2024-07-02T00:00:00Z', limit: '10000' });
    expect(res.statusCode).toBe(200);
    await new Promise<void>((resolve) => res.once('data', () => resolve()));
    // a 'data' listener switched the response to flowing mode: pause it, or it keeps draining and the export may
    // finish before we look. Paused, the server is blocked on backpressure with the cursor open.
    res.pause();
    expect(await until(() => openExportTransactions(t), (n) => n === 1)).toBe(1);
    res.destroy();
    expect(await until(() => openExportTransactions(t), (n) => n === 0)).toBe(0);
    // and the pool still serves a full page afterwards
    const after = await get(t, { company_id: '302', from: '2024-07-01T00:00:00Z', to: '2024-07-02T00:00:00Z', limit: '3' });
    expect(ndjson(after.body)).toHaveLength(4);
  });

  it('a failure after streaming began ends the stream with an _error line', async () => {
    await insertSyntheticRows(t.services.pool, { companyId: 303, count: 20_000, start: '2024-08-01T00:00:00Z', stepMs: 1000, textBytes: 4000, prefix: 'fail-' });
    const res = await open(base, { company_id: '303', from: '2024-08-01T00:00:00Z', to: '2024-08-02T00:00:00Z', limit: '10000' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.pause();
    // wait until the server stalls on backpressure between two FETCHes, then kill its database session
    expect(await until(() => openExportTransactions(t), (n) => n === 1)).toBe(1);
    const killed = await t.services.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'FETCH%export_rows%'`,
    );
    expect(killed.rowCount).toBe(1);
    const ended = new Promise<void>((resolve) => res.on('end', () => resolve()));
    res.resume();
    await ended;
    const lines = Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const last = lines.at(-1);
    expect(last).toEqual({ _error: { code: 'INTERNAL_ERROR', message: expect.any(String) } });
    const records = lines.slice(0, -1);
    expect(records.length).toBeGreaterThan(0);
    expect(records.length).toBeLessThan(10_000);
    for (const r of records) expect(r.message_id).toMatch(/^msg_[0-9a-f]{24}$/);
    expect(lines.some((l) => '_truncated' in l)).toBe(false);
    // the broken client was discarded, the app still exports
    const after = await get(t, { company_id: '303', from: '2024-08-01T00:00:00Z', to: '2024-08-02T00:00:00Z', limit: '2' });
    expect(ndjson(after.body)).toHaveLength(3);
  });
});
