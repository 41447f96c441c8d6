import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestApp } from '../support/services';
import { insertSyntheticRows, issueKey, ndjson, provisionCompany, settle } from '../support/conversation-fixtures';

// Review 9: an HTTP client that goes away while its export page is still being opened (the first batch is not
// ready yet), or a HEAD request, must not keep the page's admission slot or its database connection (one slot here:
// a slot kept would make the next page a 429).

const GLOBAL = 'sbk_global_review9disconnect0000000000';
const PATH = '/api/v1/qualitative-export/messages';
const Q = { company_id: '911', from: '2024-07-01T00:00:00Z', to: '2024-07-02T00:00:00Z', limit: '5' };

type TestApp = Awaited<ReturnType<typeof createTestApp>>;

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('review 9: export client gone before the page opened', () => {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    t = await createTestApp({ env: { EXPORT_MAX_CONCURRENT: '1', EXPORT_MAX_PER_KEY: '1', RATE_LIMIT_ENABLED: 'false' } });
    await provisionCompany(t.services, { companyId: 911 });
    await issueKey(t.services, GLOBAL, null);
    await settle(t.services);
    await insertSyntheticRows(t.services.pool, { companyId: 911, count: 20, start: Q.from, stepMs: 1000, textBytes: 100, prefix: 'r9d-' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await t?.close();
  });

  const exportPage = () => t.app.inject({ method: 'GET', url: PATH, query: Q, headers: { 'x-api-key': GLOBAL } });
  const exportConnections = () => Promise.resolve(t.services.exportPool.totalCount - t.services.exportPool.idleCount);

  it('gives the slot and the connection back', async () => {
    // hold the messages table so that the page's DECLARE/FETCH waits: the page is still opening when the client leaves
    const locker = await t.services.pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE rm_conversations.messages IN ACCESS EXCLUSIVE MODE');
      const req = httpRequest(`${base}${PATH}?${new URLSearchParams(Q)}`, { headers: { 'x-api-key': GLOBAL }, agent: false });
      req.on('error', () => undefined);
      req.end();
      // the page has its connection and waits on the lock
      expect(await until(exportConnections, (n) => n === 1)).toBe(1);
      req.destroy();
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      await locker.query('COMMIT');
      locker.release();
    }
    expect(await until(exportConnections, (n) => n === 0)).toBe(0);
    const res = await until(exportPage, (r) => r.statusCode === 200);
    expect(res.statusCode).toBe(200);
    expect(ndjson(res.body)).toHaveLength(6);
  });

  it('a HEAD request (fastify answers it from the GET route) gives its slot and connection back too', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await t.app.inject({ method: 'HEAD', url: PATH, query: Q, headers: { 'x-api-key': GLOBAL } });
      expect({ status: r.statusCode, body: r.body }).toEqual({ status: 200, body: '' });
    }
    expect(await until(exportConnections, (n) => n === 0)).toBe(0);
    expect((await until(exportPage, (r) => r.statusCode === 200)).statusCode).toBe(200);
  });
});
