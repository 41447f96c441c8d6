import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { stuckListenerWatch } from '../../src/workers/stuck-listeners';
import { createTestApp } from '../support/services';
import { insertSyntheticRows, issueKey, provisionCompany, settle } from '../support/conversation-fixtures';

// Review 17: the stuck-listener watch (1efe43a) ends sessions of our database idle in ClientWrite. Our own export
// streams NDJSON to HTTP clients at their pace: while one downloads slowly, its database session must never look
// stuck so (it waits between FETCHes, idle in transaction). A client reading a few KB at a time over real HTTP, the
// watch looking all along with its bound shortened: nothing is ended and every row arrives.

const GLOBAL = 'sbk_global_regression17slow000000000';
const PATH = '/api/v1/qualitative-export/messages';
const ROWS = 3_000;

describe('an export downloaded slowly, under the stuck-listener watch', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let base: string;

  beforeAll(async () => {
    t = await createTestApp();
    await provisionCompany(t.services, { companyId: 417 });
    await issueKey(t.services, GLOBAL, null);
    await settle(t.services);
    await insertSyntheticRows(t.services.pool, { companyId: 417, count: ROWS, start: '2024-09-01T00:00:00Z', stepMs: 1000, textBytes: 2000, prefix: 'slow-' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is never taken for a stuck session: nothing ended, every row received', async () => {
    const query = new URLSearchParams({ company_id: '417', from: '2024-09-01T00:00:00Z', to: '2024-09-02T00:00:00Z', limit: String(ROWS) });
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest(`${base}${PATH}?${query}`, { headers: { 'x-api-key': GLOBAL } }, resolve);
      req.on('error', reject);
      req.end();
    });
    expect(res.statusCode).toBe(200);
    res.pause();

    const look = stuckListenerWatch(t.services.pool, { stuckMs: 1_000, lookEveryMs: 200, now: () => Date.now() });
    const ended: unknown[] = [];
    const seenWriting: unknown[] = [];
    let body = '';
    let done = false;
    res.on('end', () => (done = true));
    // about 8 KB every 100 ms: the whole page (~7 MB) takes minutes at this pace; a few seconds of it are enough
    // for the pipes to fill, and the watch looks at every step
    for (let step = 0; step < 200 && !done; step++) {
      const chunk = res.read(8192) as Buffer | null;
      if (chunk) body += chunk.toString('utf8');
      ended.push(...(await look()));
      const writing = await t.services.pool.query(
        `SELECT pid, state FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event = 'ClientWrite' AND state = 'idle'`);
      seenWriting.push(...writing.rows);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect({ ended, seenWriting }).toEqual({ ended: [], seenWriting: [] });
    // then read the rest at full speed: the page is whole
    res.resume();
    res.setEncoding('utf8');
    for await (const chunk of res) body += chunk;
    const lines = body.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => '_error' in l || '_truncated' in l)).toEqual([]);
    expect(lines).toHaveLength(ROWS);
  }, 180_000);
});
