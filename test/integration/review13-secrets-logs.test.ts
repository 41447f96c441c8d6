// Review 13 (2026-11-28): what the logs hold (docs/reliability.md, "What is logged (2026-11-28)").
//  - A Postgres error logged as `{ err }` (a 500's "unhandled error", a worker's "batch failed") carried pg's `detail`
//    ("Key (phone)=(+49…) already exists", "Failing row contains (…, <message body>)") and `where`: row values,
//    phone numbers and message bodies in the log at the default level. Now `[redacted]`; message, code, table,
//    constraint stay.
//  - Only `x-api-key` was redacted (and only on the process logger and the API app; the ops listener had none):
//    `authorization`, `webhook-signature`, `x-hub-signature-256`, cookies went out as logged.
//  - An access-log line (`{ req }`, as fastify writes "incoming request") showed the URL with its query string:
//    `?phone=…` of a contact lookup, `hub.verify_token=…` of the provider's handshake.
// Real Postgres errors, the real app over real HTTP, the process logger as src/main.ts builds it.
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { DatabaseError } from 'pg';
import { loadConfig } from '../../src/config';
import { buildApp } from '../../src/http/app';
import { buildOpsApp } from '../../src/http/ops-app';
import { createLogger } from '../../src/main';
import { httpLoggerOptions } from '../../src/observability/logging';
import { createTestContext, type TestContext } from '../support/services';

const PHONE = '+4915112345678';
const OTHER_PHONE = '+4915199990001';
const BODY = 'my secret message body';
const API_KEY = 'sbk_review13_0123456789abcdefghijkl';
const BEARER = 'Bearer EAAG-review13-access-token';
const SIGNATURE = 'v1,review13signaturebase64==';
const HUB_SIGNATURE = 'sha256=review13deadbeef';
const VERIFY_TOKEN = 'review13-verify-token';

function capture(): { lines: any[]; text: () => string; stream: Writable } {
  const lines: any[] = [];
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      raw.push(String(chunk));
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { lines, text: () => raw.join(''), stream };
}

const flush = () => new Promise((ok) => setImmediate(ok));

describe('review13: secrets and row values in logs', () => {
  let t: TestContext;
  let uniqueViolation: DatabaseError;
  let checkViolation: DatabaseError;

  beforeAll(async () => {
    t = await createTestContext({ runner: false });
    await t.db.pool.query('CREATE TABLE review13_people (phone text PRIMARY KEY, body text CHECK (length(body) < 5))');
    await t.db.pool.query('INSERT INTO review13_people VALUES ($1, $2)', [PHONE, 'hi']);
    uniqueViolation = await t.db.pool.query('INSERT INTO review13_people VALUES ($1, $2)', [PHONE, 'hi']).then(() => { throw new Error('no error'); }, (e) => e);
    checkViolation = await t.db.pool.query('INSERT INTO review13_people VALUES ($1, $2)', [OTHER_PHONE, BODY]).then(() => { throw new Error('no error'); }, (e) => e);
  });
  afterAll(async () => {
    await t.close();
  });

  it('the Postgres errors themselves hold the row values (what the log must not show)', () => {
    expect(uniqueViolation).toBeInstanceOf(DatabaseError);
    expect(uniqueViolation.detail).toContain(PHONE);
    expect(checkViolation.detail).toContain(BODY);
    expect(checkViolation.detail).toContain(OTHER_PHONE);
  });

  it('the process logger (serve, worker, CLI) logs a Postgres error without its row values', async () => {
    const out = capture();
    const logger = createLogger(loadConfig({ LOG_LEVEL: 'info' }), out.stream);
    logger.error({ err: uniqueViolation, projection: 'contacts' }, 'projection batch failed');
    logger.error({ err: checkViolation }, 'webhook fan-out batch failed');
    // an error holding a Postgres error (a wrapper with it as a property, an AggregateError of them)
    logger.error({ err: Object.assign(new Error('batch failed'), { inner: uniqueViolation }) }, 'wrapped');
    logger.error({ err: new AggregateError([checkViolation], 'several failed') }, 'aggregate');
    await flush();
    const text = out.text();
    expect(text).not.toContain(PHONE);
    expect(text).not.toContain(OTHER_PHONE);
    expect(text).not.toContain(BODY);
    // what an operator needs stays
    expect(out.lines[0].err).toMatchObject({
      type: 'DatabaseError', code: '23505', message: expect.stringContaining('duplicate key value violates unique constraint'),
      constraint: 'review13_people_pkey', table: 'review13_people', detail: '[redacted]',
    });
    expect(out.lines[1].err).toMatchObject({ code: '23514', constraint: 'review13_people_body_check', detail: '[redacted]' });
    expect(out.lines[2].err.inner).toMatchObject({ code: '23505', detail: '[redacted]' });
    expect(out.lines[3].err.aggregateErrors[0]).toMatchObject({ code: '23514', detail: '[redacted]' });
    // the errors themselves are not changed by logging them
    expect(uniqueViolation.detail).toContain(PHONE);
  });

  it('the process logger redacts credential and signature headers wherever a header set is logged', async () => {
    const out = capture();
    const logger = createLogger(loadConfig({ LOG_LEVEL: 'info' }), out.stream);
    const headers = { 'x-api-key': API_KEY, authorization: BEARER, 'webhook-signature': SIGNATURE, 'x-hub-signature-256': HUB_SIGNATURE, 'content-type': 'application/json' };
    logger.warn({ headers }, 'a webhook answer');
    logger.warn({ req: { headers } }, 'a request');
    await flush();
    const text = out.text();
    for (const secret of [API_KEY, BEARER, SIGNATURE, HUB_SIGNATURE]) expect(text).not.toContain(secret);
    expect(out.lines[0].headers).toEqual({
      'x-api-key': '[redacted]', authorization: '[redacted]', 'webhook-signature': '[redacted]', 'x-hub-signature-256': '[redacted]', 'content-type': 'application/json',
    });
  });

  describe('the HTTP listeners (API app and ops listener, as src/main.ts builds them)', () => {
    const out = capture();
    let app: Awaited<ReturnType<typeof buildApp>>;
    let ops: Awaited<ReturnType<typeof buildOpsApp>>;
    let url: string;
    let opsUrl: string;
    const logHeadersAndAccess = async (request: any) => {
      request.log.info({ headers: request.headers }, 'request headers');
      request.log.info({ req: request }, 'incoming request'); // what fastify's access log writes
      return { ok: true };
    };

    beforeAll(async () => {
      app = await buildApp(t.services, { logger: httpLoggerOptions('info', out.stream) });
      app.get('/review13/boom', async () => {
        await t.db.pool.query('INSERT INTO review13_people VALUES ($1, $2)', [PHONE, 'hi']);
        return { ok: true };
      });
      app.post('/review13/headers', logHeadersAndAccess);
      app.get('/review13/headers', logHeadersAndAccess);
      url = await app.listen({ port: 0, host: '127.0.0.1' });
      ops = await buildOpsApp(t.services, { logger: httpLoggerOptions('info', out.stream) });
      ops.get('/review13/headers', logHeadersAndAccess);
      await ops.listen({ port: 0, host: '127.0.0.1' });
      opsUrl = `http://127.0.0.1:${(ops.server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      await app?.close();
      await ops?.close();
    });

    it('a 500 from a Postgres error: the body hides everything, the log line has the error without its row values', async () => {
      const before = out.lines.length;
      const res = await fetch(`${url}/review13/boom`);
      expect(res.status).toBe(500);
      const body = await res.text();
      expect(JSON.parse(body)).toEqual({ error: 'internal server error' });
      expect(body).not.toContain(PHONE);
      await flush();
      const logged = out.lines.slice(before).filter((l) => l.msg === 'unhandled error');
      expect(logged).toHaveLength(1);
      expect(logged[0].err).toMatchObject({ code: '23505', detail: '[redacted]' });
      expect(JSON.stringify(out.lines.slice(before))).not.toContain(PHONE);
    });

    it.each([['API app', () => url], ['ops listener', () => opsUrl]])('%s: credential and signature headers are redacted, an access line has no query string', async (_name, base) => {
      const before = out.lines.length;
      const res = await fetch(`${base()}/review13/headers?phone=${encodeURIComponent(PHONE)}&hub.verify_token=${VERIFY_TOKEN}`, {
        headers: { 'x-api-key': API_KEY, authorization: BEARER, 'webhook-signature': SIGNATURE, 'x-hub-signature-256': HUB_SIGNATURE, cookie: 'session=review13cookie' },
      });
      expect(res.status).toBe(200);
      await flush();
      const lines = out.lines.slice(before);
      const text = JSON.stringify(lines);
      for (const secret of [API_KEY, BEARER, SIGNATURE, HUB_SIGNATURE, 'review13cookie', VERIFY_TOKEN, PHONE, encodeURIComponent(PHONE)]) {
        expect(text).not.toContain(secret);
      }
      const headers = lines.find((l) => l.msg === 'request headers').headers;
      expect(headers).toMatchObject({ 'x-api-key': '[redacted]', authorization: '[redacted]', 'webhook-signature': '[redacted]', 'x-hub-signature-256': '[redacted]', cookie: '[redacted]' });
      expect(lines.find((l) => l.msg === 'incoming request').req).toMatchObject({ method: 'GET', url: '/review13/headers?[redacted]' });
    });
  });
});
