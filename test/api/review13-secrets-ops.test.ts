// Review 13 (2026-11-28): what the key-less ops endpoints show (docs/reliability.md, "What is logged (2026-11-28)").
//  - /readyz answered a failing check with the failure's own message (`failing: connect ECONNREFUSED 10.0.0.5:5432`,
//    `failing: role "…" does not exist`, a broker's address): hosts, addresses and user names of the backends to
//    anyone who can reach the listener. Now `failing: see the server log` (the message is logged), or our own
//    `failing: timed out after 2000 ms`.
//  - /metrics (a guard): labels are route templates, methods and statuses only; no phone, key, path or id of a
//    request reaches it, and unknown paths share one `unmatched` series (no series per URL).
// Real app over real HTTP, real Postgres (and a real Postgres that refuses the connection).
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { buildApp } from '../../src/http/app';
import { buildOpsApp } from '../../src/http/ops-app';
import { httpLoggerOptions } from '../../src/observability/logging';
import { createTestContext, type TestContext } from '../support/services';

const PHONE = '+4915112345678';
const GHOST_USER = 'review13_ghost_user';

describe('review13: /readyz, /healthz and /metrics show no secrets', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext({ runner: false });
  });
  afterAll(async () => {
    await t.close();
  });

  describe('/readyz with failing backends', () => {
    const logged: any[] = [];
    const stream = new Writable({ write(chunk, _e, done) { for (const l of String(chunk).split('\n').filter(Boolean)) logged.push(JSON.parse(l)); done(); } });
    const closedPort = 1; // nothing listens there: ECONNREFUSED names the address
    const unknownUser = new URL(process.env.TEST_DATABASE_URL!);
    unknownUser.username = GHOST_USER;
    unknownUser.password = 'review13-password';
    const refused = createPool(`postgres://review13:review13-password@127.0.0.1:${closedPort}/nodb`, 1);
    const ghost = createPool(unknownUser.toString(), 1);
    const apps: Array<Awaited<ReturnType<typeof buildOpsApp>>> = [];
    afterAll(async () => {
      for (const a of apps) await a.close();
      await refused.end().catch(() => undefined);
      await ghost.end().catch(() => undefined);
    });

    it.each([['the API app', 'app'], ['the ops listener', 'ops']])('%s answers only that the checks fail; the reason is logged', async (_n, which) => {
      const services = { ...t.services, pool: refused, store: new PostgresEventStore(ghost) };
      const app = which === 'app'
        ? await buildApp(services, { logger: httpLoggerOptions('info', stream) })
        : await buildOpsApp(services, { logger: httpLoggerOptions('info', stream) });
      apps.push(app);
      await app.listen({ port: 0, host: '127.0.0.1' });
      const before = logged.length;
      const res = await fetch(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/readyz`);
      const body = await res.text();
      expect(res.status).toBe(503);
      expect(JSON.parse(body)).toEqual({ status: 'not ready', checks: { database: 'failing: see the server log', eventStore: 'failing: see the server log' } });
      for (const secret of ['127.0.0.1', `:${closedPort}`, 'ECONNREFUSED', GHOST_USER, 'review13-password']) expect(body).not.toContain(secret);
      // the operator finds the reasons in the log
      const reasons = logged.slice(before).filter((l) => l.msg === 'readiness check failed');
      expect(reasons.map((l) => l.check).sort()).toEqual(['database', 'eventStore']);
      expect(reasons.find((l) => l.check === 'database').err.message).toMatch(/ECONNREFUSED/);
      expect(reasons.find((l) => l.check === 'eventStore').err.message).toContain(GHOST_USER);
      expect(JSON.stringify(logged)).not.toContain('review13-password');
    });

    it('a healthy /readyz and /healthz say no more than ok', async () => {
      const ops = await buildOpsApp(t.services);
      apps.push(ops);
      expect((await ops.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready', checks: { database: 'ok', eventStore: 'ok' } });
      expect((await ops.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    });
  });

  describe('/metrics', () => {
    let app: Awaited<ReturnType<typeof buildApp>>;
    let url: string;
    beforeAll(async () => {
      app = await buildApp(t.services);
      url = await app.listen({ port: 0, host: '127.0.0.1' });
    });
    afterAll(async () => {
      await app.close();
    });

    it('holds no phone, key, path or id of the requests, and one series for all unknown paths', async () => {
      const secrets: string[] = [PHONE];
      const key = () => {
        const k = `sbk_${randomBytes(16).toString('hex')}`;
        secrets.push(k);
        return k;
      };
      const requests: Array<Promise<Response>> = [];
      for (let i = 0; i < 20; i++) {
        const segment = `review13-${randomBytes(6).toString('hex')}`;
        const id = `${randomBytes(8).toString('hex')}`;
        secrets.push(segment, id);
        requests.push(
          fetch(`${url}/${segment}/${PHONE}`),
          fetch(`${url}/api/v1/contact-lookup/?phone=${encodeURIComponent(PHONE)}`, { headers: { 'x-api-key': key() } }),
          fetch(`${url}/api/v1/platform-templates/messages/${id}/`, { headers: { 'x-api-key': key() } }),
          fetch(`${url}/webhooks/provider`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${id}` }, body: JSON.stringify({ phone: PHONE }) }),
        );
      }
      const statuses = (await Promise.all(requests)).map((r) => r.status);
      expect(new Set(statuses)).toEqual(new Set([404, 401]));
      const text = await (await fetch(`${url}/metrics`)).text();
      for (const s of secrets) expect(text).not.toContain(s);
      expect(text).not.toContain('4915112345678');
      // (the /readyz series are the tests' above: the registry is the context's)
      const series = text.split('\n').filter((l) => l.startsWith('switchboard_http_request_duration_seconds_count') && !l.includes('route="/readyz"'));
      // 80 requests to 80 distinct URLs: one series per method, route template and status
      expect(series.map((l) => l.replace(/ \d+$/, '')).sort()).toEqual([
        'switchboard_http_request_duration_seconds_count{method="GET",route="/api/v1/contact-lookup/",status="401"}',
        'switchboard_http_request_duration_seconds_count{method="GET",route="/api/v1/platform-templates/messages/:message_id/",status="401"}',
        'switchboard_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"}',
        'switchboard_http_request_duration_seconds_count{method="POST",route="/webhooks/provider",status="401"}',
      ]);
    });
  });
});
