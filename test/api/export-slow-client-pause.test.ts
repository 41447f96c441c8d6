import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Pool } from 'pg';
import { createPool } from '../../src/adapters/postgres/pool';
import { buildApp } from '../../src/http/app';
import type { ExportLimits } from '../../src/http/export-admission';
import { createTestContext, type TestContext } from '../support/services';
import { insertSyntheticRows, issueKey, provisionCompany, settle } from '../support/conversation-fixtures';

// A client that stops reading its export page (a laptop asleep, a buffering proxy, full socket buffers) for longer
// than the service's idle bounds, then reads on, must get the page whole; one that goes away must free the page's
// slot and connection; one that never reads again must not hold them for ever (docs/export.md, "Slow clients").
// The bounds are shortened, so the pauses are seconds long: the pools' idle_in_transaction_session_timeout (30 s)
// through the export pool's URL `options`, as an operator would set it; the HTTP server's connection timeout
// (fastify's connectionTimeout, 30 s) with server.setTimeout, as fastify sets it; the export's own stall bound
// (10 min) through its limits. One slot in all, so a slot kept is a 429 for the next page.

const GLOBAL = 'sbk_global_exportslowpause00000000000';
const PATH = '/api/v1/qualitative-export/messages';
const ROWS = 5_000;
const POOL_IDLE_IN_TX_MS = 1_000;
const SERVER_SOCKET_TIMEOUT_MS = 1_500;
const EXPORT_STALL_MS = 8_000;
const QUERY = { company_id: '418', from: '2024-10-01T00:00:00Z', to: '2024-10-02T00:00:00Z', limit: String(ROWS) };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > deadline) return v;
    await sleep(100);
  }
}

function withOptions(url: string, options: string): string {
  const u = new URL(url);
  u.searchParams.set('options', options);
  return u.toString();
}

describe('an export whose client stops reading', () => {
  let ctx: TestContext;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let base: string;
  let exportPool: Pool;

  beforeAll(async () => {
    ctx = await createTestContext({ env: { EXPORT_MAX_CONCURRENT: '1', EXPORT_MAX_PER_KEY: '1', RATE_LIMIT_ENABLED: 'false' } });
    // the export pool as main.ts makes it, on a URL that shortens its sessions' idle-in-transaction bound
    exportPool = createPool(withOptions(ctx.db.url, `-c idle_in_transaction_session_timeout=${POOL_IDLE_IN_TX_MS}`), 1);
    const limits: ExportLimits = { ...ctx.services.config.export, maxStallMs: EXPORT_STALL_MS };
    ctx.services.exportPool = exportPool;
    ctx.services.config = { ...ctx.services.config, export: limits };
    app = await buildApp(ctx.services);
    await provisionCompany(ctx.services, { companyId: 418 });
    await issueKey(ctx.services, GLOBAL, null);
    await settle(ctx.services);
    // ~12 MB: more than the socket buffers and the stream's own, so the page waits for its client
    await insertSyntheticRows(ctx.services.pool, { companyId: 418, count: ROWS, start: QUERY.from, stepMs: 1000, textBytes: 2000, prefix: 'pause-' });
    await app.listen({ port: 0, host: '127.0.0.1' });
    app.server.setTimeout(SERVER_SOCKET_TIMEOUT_MS);
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await app?.close();
    await ctx?.close();
    await exportPool?.end();
  });

  /** how long (ms) the export's session has been idle in its transaction between two FETCHes; undefined: none is */
  const exportSessionIdleMs = async () =>
    (
      await ctx.services.pool.query<{ idle_ms: number }>(
        `SELECT (extract(epoch FROM now() - state_change) * 1000)::int AS idle_ms FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'idle in transaction' AND query LIKE 'FETCH%'`,
      )
    ).rows[0]?.idle_ms;
  const exportConnectionsInUse = () => Promise.resolve(exportPool.totalCount - exportPool.idleCount);

  function open(query: Record<string, string> = QUERY): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${base}${PATH}?${new URLSearchParams(query)}`, { headers: { 'x-api-key': GLOBAL }, agent: false }, resolve);
      req.on('error', reject);
      req.end();
    });
  }

  /** the whole lines of a body, parsed (a body cut mid-line leaves its last part out) */
  const wholeLines = (body: string) => body.split('\n').slice(0, -1).map((l) => JSON.parse(l) as Record<string, unknown>);

  async function readRest(res: IncomingMessage): Promise<{ body: string; complete: boolean; error?: string }> {
    let body = '';
    res.setEncoding('utf8');
    try {
      for await (const chunk of res) body += chunk;
    } catch (err) {
      return { body, complete: false, error: (err as Error).message };
    }
    return { body, complete: res.complete };
  }

  /** a short page of the same export, read whole: its status (429 while the one slot is taken) */
  async function anotherPage(): Promise<number> {
    const res = await open({ ...QUERY, limit: '3' });
    await readRest(res);
    return res.statusCode!;
  }

  it('gets every line, in order, with no _error, after a pause longer than the pool and server bounds', async () => {
    const res = await open();
    expect(res.statusCode).toBe(200);
    res.pause();
    // the pipes are full: the page waits for its client, idle in its transaction
    expect(await until(exportSessionIdleMs, (ms) => ms !== undefined)).toBeDefined();
    await sleep(2 * Math.max(POOL_IDLE_IN_TX_MS, SERVER_SOCKET_TIMEOUT_MS));
    const read = await readRest(res);
    const lines = wholeLines(read.body);
    expect({ complete: read.complete, error: read.error, signals: lines.filter((l) => '_error' in l || '_truncated' in l) })
      .toEqual({ complete: true, error: undefined, signals: [] });
    expect(lines).toHaveLength(ROWS);
    const times = lines.map((l) => l.occurred_at as string);
    expect(times).toEqual([...times].sort());
    expect(new Set(lines.map((l) => l.message_id)).size).toBe(ROWS);
    expect(await until(exportConnectionsInUse, (n) => n === 0)).toBe(0);
  }, 120_000);

  it('gives the slot and the connection back when the client disconnects mid-stream', async () => {
    const res = await open();
    expect(res.statusCode).toBe(200);
    res.pause();
    expect(await until(exportSessionIdleMs, (ms) => ms !== undefined)).toBeDefined();
    expect(await anotherPage()).toBe(429);
    res.destroy();
    expect(await until(exportConnectionsInUse, (n) => n === 0)).toBe(0);
    expect(await until(exportSessionIdleMs, (ms) => ms === undefined)).toBeUndefined();
    expect(await until(anotherPage, (status) => status === 200)).toBe(200);
  }, 120_000);

  it('ends a page whose client never reads again after the export bound: slot and connection back, connection closed', async () => {
    const res = await open();
    expect(res.statusCode).toBe(200);
    res.pause();
    expect(await until(exportSessionIdleMs, (ms) => ms !== undefined)).toBeDefined();
    expect(await anotherPage()).toBe(429);
    // the client stays paused: past the bound the page ends on its own
    expect(await until(anotherPage, (status) => status === 200, 4 * EXPORT_STALL_MS)).toBe(200);
    expect(await until(exportConnectionsInUse, (n) => n === 0)).toBe(0);
    expect(await exportSessionIdleMs()).toBeUndefined();
    // what the client gets when it wakes up: what was sent before the end, then a connection closed mid-body
    const read = await readRest(res);
    expect(read.complete).toBe(false);
    expect(wholeLines(read.body).length).toBeLessThan(ROWS);
  }, 120_000);
});
