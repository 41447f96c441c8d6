import { get as httpGet, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Pool } from 'pg';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { insertSyntheticRows, ndjson } from '../support/conversation-fixtures';
import { EXAMPLE, SECOND, twoCompanyFixture } from '../support/provisioning';
import { createTestApp } from '../support/services';

// Admission control of the export (docs/export.md, "Concurrent exports"): pages held open by real HTTP clients
// that do not read take the export's slots and its own pool's connections; over a limit the answer is an
// immediate 429; the other endpoints and the main pool are untouched; slots come back on every way a page ends.

const PATH = '/api/v1/qualitative-export/messages';
const DAY = { from: '2024-07-01T00:00:00Z', to: '2024-07-02T00:00:00Z' };
// 10,000 rows of ~2 KB: a page of ~20 MB cannot finish into the socket buffers of a client that does not read
const BIG = { ...DAY, limit: '10000' };
const SMALL = { ...DAY, limit: '2' };

type TestApp = Awaited<ReturnType<typeof createTestApp>>;

const KEY_LIMIT = {
  error: {
    code: 'TOO_MANY_EXPORTS',
    message: 'too many exports at once: this API key already has 1 export page streaming, the most allowed per key; retry in 5 seconds',
  },
};
const PROCESS_LIMIT = {
  error: {
    code: 'TOO_MANY_EXPORTS',
    message: 'too many exports at once: the service is already streaming 2 export pages, the most it serves at once; retry in 5 seconds',
  },
};

const inUse = (pool: Pool) => pool.totalCount - pool.idleCount;

describe('export admission', () => {
  let t: TestApp;
  let base: string;
  const held: IncomingMessage[] = [];

  beforeAll(async () => {
    // the rate limiter's periodic sync borrows a main-pool connection for a moment: off, so the pool counts below
    // see only the requests' own use
    t = await createTestApp({ env: { EXPORT_MAX_CONCURRENT: '2', EXPORT_MAX_PER_KEY: '1', RATE_LIMIT_ENABLED: 'false' } });
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
    for (const companyId of [EXAMPLE.companyId, SECOND.companyId]) {
      await insertSyntheticRows(t.services.pool, { companyId, count: 10_001, start: DAY.from, stepMs: 1000, textBytes: 2000, prefix: `adm-${companyId}-` });
    }
    // nothing in the background uses the main pool from here on: what it has checked out is what requests take
    await t.services.runner.stop();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    for (const res of held.splice(0)) res.destroy();
    // the next test starts with every slot free and every export connection back in its pool
    for (const [key, companyId] of [[EXAMPLE.key, EXAMPLE.companyId], [SECOND.key, SECOND.companyId]] as const) {
      expect((await untilStatus(() => exportOf(key, { ...company(companyId), ...SMALL }), 200)).statusCode).toBe(200);
    }
    for (let i = 0; i < 200 && inUse(t.services.exportPool) > 0; i++) await pause();
    expect(inUse(t.services.exportPool)).toBe(0);
  });
  afterAll(async () => {
    await t?.close();
  });

  const pause = () => new Promise((r) => setTimeout(r, 20));
  const company = (id: number) => ({ company_id: String(id) });
  const exportOf = (key: string | undefined, query: Record<string, string>) =>
    t.app.inject({ method: 'GET', url: PATH, query, headers: key === undefined ? {} : { 'x-api-key': key } });

  /** An export page over real HTTP whose client never reads: it holds its slot until destroyed. */
  function hold(key: string, query: Record<string, string>): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = httpGet(`${base}${PATH}?${new URLSearchParams(query)}`, { headers: { 'x-api-key': key }, agent: false }, (res) => {
        res.pause();
        held.push(res);
        resolve(res);
      });
      req.on('error', reject);
    });
  }

  /** Repeats a request until it answers `status`, at most `attempts` times; returns the last answer. */
  async function untilStatus(send: () => ReturnType<typeof exportOf>, status: number, attempts = 200) {
    let res = await send();
    for (let i = 1; i < attempts && res.statusCode !== status; i++) {
      await pause();
      res = await send();
    }
    return res;
  }

  it('refuses a key over its limit at once with 429 and Retry-After; another key streams until the process limit', async () => {
    const first = await hold(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...BIG });
    expect(first.statusCode).toBe(200);

    const sameKey = await exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...SMALL });
    expect(sameKey.statusCode).toBe(429);
    expect(sameKey.headers['retry-after']).toBe('5');
    expect(sameKey.headers['content-type']).toMatch(/^application\/json/);
    expect(sameKey.json()).toEqual(KEY_LIMIT);

    const otherKey = await hold(SECOND.key, { ...company(SECOND.companyId), ...BIG });
    expect(otherKey.statusCode).toBe(200);

    const third = await exportOf(EXAMPLE.globalKey, { ...company(SECOND.companyId), ...SMALL });
    expect(third.statusCode).toBe(429);
    expect(third.headers['retry-after']).toBe('5');
    expect(third.json()).toEqual(PROCESS_LIMIT);
  });

  it('authentication, parameter and access errors keep precedence over the limits', async () => {
    await hold(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...BIG });
    await hold(SECOND.key, { ...company(SECOND.companyId), ...BIG });

    const noKey = await exportOf(undefined, { ...company(EXAMPLE.companyId), ...SMALL });
    expect(noKey.statusCode).toBe(401);
    expect(noKey.json().error.code).toBe('AUTH_REQUIRED');
    const badRange = await exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), from: DAY.to, to: DAY.from });
    expect(badRange.statusCode).toBe(400);
    expect(badRange.json().error.code).toBe('INVALID_PARAMETER');
    const otherCompany = await exportOf(EXAMPLE.key, { ...company(SECOND.companyId), ...SMALL });
    expect(otherCompany.statusCode).toBe(403);
    expect(otherCompany.json().error.code).toBe('COMPANY_ACCESS_DENIED');
    const badCursor = await exportOf(EXAMPLE.globalKey, { ...company(EXAMPLE.companyId), ...SMALL, cursor: 'not-a-cursor' });
    expect(badCursor.statusCode).toBe(400);
    expect(badCursor.json().error.code).toBe('INVALID_PARAMETER');
  });

  it('the other endpoints keep answering while exports hold every slot, and the main pool lends them nothing', async () => {
    expect(t.services.exportPool).not.toBe(t.services.pool);
    // warm: every lazily opened connection of the main pool (key lookups, caches) is open before the baseline
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/business-accounts/', headers: { 'x-api-key': EXAMPLE.key } })).statusCode).toBe(200);
    expect((await exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...SMALL })).statusCode).toBe(200);
    const mainBefore = inUse(t.services.pool);
    expect(inUse(t.services.exportPool)).toBe(0);

    await hold(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...BIG });
    await hold(SECOND.key, { ...company(SECOND.companyId), ...BIG });
    expect(inUse(t.services.exportPool)).toBe(2);
    expect(inUse(t.services.pool)).toBe(mainBefore);

    // more reads at once than the export pool has connections, all answered
    const reads = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        t.app.inject({
          method: 'GET',
          url: i % 2 ? '/api/v1/business-info/' : '/api/v1/business-accounts/',
          headers: { 'x-api-key': i % 4 < 2 ? EXAMPLE.key : SECOND.key },
        })),
    );
    expect(reads.map((r) => r.statusCode)).toEqual(Array(10).fill(200));
    expect((await exportOf(EXAMPLE.globalKey, { ...company(EXAMPLE.companyId), ...SMALL })).statusCode).toBe(429);
    expect(inUse(t.services.pool)).toBe(mainBefore);
    expect(inUse(t.services.exportPool)).toBe(2);
  });

  it('slots come back when the held clients go away', async () => {
    const a = await hold(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...BIG });
    const b = await hold(SECOND.key, { ...company(SECOND.companyId), ...BIG });
    expect((await exportOf(EXAMPLE.globalKey, { ...company(EXAMPLE.companyId), ...SMALL })).statusCode).toBe(429);
    a.destroy();
    b.destroy();

    // the key that was at its limit gets a full page again
    const again = await untilStatus(() => exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...SMALL }), 200);
    expect(again.statusCode).toBe(200);
    expect(ndjson(again.body)).toHaveLength(3);
    // and both process slots are free: two pages can be held again
    expect((await untilStatus(() => exportOf(SECOND.key, { ...company(SECOND.companyId), ...SMALL }), 200)).statusCode).toBe(200);
    expect((await hold(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...BIG })).statusCode).toBe(200);
    expect((await hold(SECOND.key, { ...company(SECOND.companyId), ...BIG })).statusCode).toBe(200);
  });

  it('a page that ends gives its slot back: one key exports page after page', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...SMALL });
      expect(res.statusCode).toBe(200);
    }
  });

  it('a page that fails after streaming began gives its slot back', async () => {
    const res = await hold(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...BIG });
    expect(res.statusCode).toBe(200);
    expect((await exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...SMALL })).statusCode).toBe(429);
    const killed = await t.services.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'FETCH%export_rows%'`,
    );
    expect(killed.rowCount).toBe(1);
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    const ended = new Promise<void>((resolve) => res.on('end', () => resolve()));
    res.resume();
    await ended;
    const last = Buffer.concat(chunks).toString('utf8').trimEnd().split('\n').at(-1)!;
    expect(JSON.parse(last)).toEqual({ _error: { code: 'INTERNAL_ERROR', message: expect.any(String) } });

    expect((await untilStatus(() => exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...SMALL }), 200)).statusCode).toBe(200);
  });

  it('a page that fails before streaming began gives its slot back', async () => {
    await t.services.pool.query('ALTER TABLE rm_conversations.messages RENAME TO messages_away');
    try {
      // one slot per key: a second failure would be a 429 if the first had kept its slot
      for (let i = 0; i < 3; i++) {
        const res = await exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...SMALL });
        expect(res.statusCode).toBe(500);
        expect(res.json()).toEqual({ error: { code: 'INTERNAL_ERROR', message: 'internal server error' } });
      }
    } finally {
      await t.services.pool.query('ALTER TABLE rm_conversations.messages_away RENAME TO messages');
    }
    expect((await exportOf(EXAMPLE.key, { ...company(EXAMPLE.companyId), ...SMALL })).statusCode).toBe(200);
  });
});
