import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXPORT_PATH } from '../../src/http/routes/export';
import { createTestApp } from '../support/services';
import { EXAMPLE, SECOND, twoCompanyFixture } from '../support/provisioning';

// Regression review 12 of 90edd2b (the per-key limit checked on onRequest right after authentication's `identify`),
// on the real app, real Postgres and a real socket: every /api/ operation is limited before its own checks, a
// limited key's large body refused before it is read leaves the keep-alive connection usable, and a keyed request
// refused 429 records nothing under its Idempotency-Key. docs/rate-limits.md.

const MINUTE = 60_000;
let clock = Date.parse('2026-03-01T10:00:10.000Z');
const UUID = '6f1c2b3a-0000-4000-8000-000000000000';
const ACCOUNTS = '/api/v1/business-accounts/';

/** One call of every operation the OpenAPI document lists under /api/ (path parameters filled in), plus the export. */
const OPERATIONS: Array<{ method: 'GET' | 'POST' | 'PATCH' | 'DELETE'; path: string; url: string }> = [
  ['GET', '/api/v1/business-info/'], ['GET', '/api/v1/business-hours/'], ['GET', '/api/v1/holidays/'],
  ['GET', '/api/v1/contact-lookup/'], ['GET', '/api/v1/external/contacts/'], ['POST', '/api/v1/external/contacts/upsert/'],
  ['GET', '/api/v1/business-accounts/'], ['POST', '/api/v1/platform-templates/send/'],
  ['GET', '/api/v1/platform-templates/messages/{message_id}/'], ['GET', '/api/v1/qualitative-export/messages'],
  ['POST', '/api/v1/platform-templates/send-bulk/'], ['GET', '/api/v1/platform-templates/bulk-sends/'],
  ['GET', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/'], ['GET', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/'],
  ['POST', '/api/v1/platform-templates/bulk-sends/{bulk_send_id}/cancel/'], ['POST', '/api/v1/webhook-endpoints/'],
  ['GET', '/api/v1/webhook-endpoints/'], ['GET', '/api/v1/webhook-endpoints/{id}/'], ['PATCH', '/api/v1/webhook-endpoints/{id}/'],
  ['DELETE', '/api/v1/webhook-endpoints/{id}/'], ['POST', '/api/v1/webhook-endpoints/{id}/rotate-secret/'],
  ['GET', '/api/v1/webhook-endpoints/{id}/deliveries/'], ['POST', '/api/v1/webhook-endpoints/{id}/deliveries/{delivery_id}/retry/'],
  ['POST', '/api/v1/webhook-endpoints/{id}/recover/'], ['POST', '/api/v1/webhook-endpoints/{id}/test/'],
].map(([method, path]) => ({
  method: method as 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path,
  url: path.replace(/\{message_id\}/, 'wamid.X').replace(/\{[a-z_]+\}/g, UUID),
}));

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Reads consecutive HTTP/1.1 answers (each with Content-Length) off one socket. */
class AnswerReader {
  private buffer = Buffer.alloc(0);
  private waiting: Array<() => void> = [];
  closed = false;

  constructor(socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, d]);
      this.waiting.splice(0).forEach((w) => w());
    });
    socket.on('close', () => {
      this.closed = true;
      this.waiting.splice(0).forEach((w) => w());
    });
  }

  async next(): Promise<RawAnswer> {
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end >= 0) {
        const [statusLine, ...lines] = this.buffer.subarray(0, end).toString('latin1').split('\r\n');
        const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
        const length = Number(headers['content-length'] ?? 0);
        if (this.buffer.length >= end + 4 + length) {
          const body = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
          this.buffer = this.buffer.subarray(end + 4 + length);
          return { status: Number(statusLine.split(' ')[1]), headers, body };
        }
      }
      if (this.closed) throw new Error(`connection closed before a complete answer (${this.buffer.length} bytes pending)`);
      await new Promise<void>((r) => this.waiting.push(r));
    }
  }
}

describe('regress review 12: the limit on onRequest (90edd2b)', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let port: number;

  beforeAll(async () => {
    t = await createTestApp({
      now: () => new Date(clock),
      env: { RATE_LIMIT_PER_MINUTE: '2', WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' },
    });
    await seedFixture(t.services, twoCompanyFixture(), { actor: 'test' });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The clock `seconds` into a minute no earlier test used. */
  const freshMinute = (seconds: number) => {
    clock = (Math.floor(clock / MINUTE) + 1) * MINUTE + seconds * 1000;
  };
  const useUp = async (key: string) => {
    for (let i = 0; i < 2; i++) expect((await t.app.inject({ method: 'GET', url: ACCOUNTS, headers: { 'x-api-key': key } })).statusCode).toBe(200);
  };

  it('the operations listed are every /api/ operation of the OpenAPI document (and the export)', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, unknown>> };
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    expect(documented.filter((op) => op.includes(' /api/')).sort()).toEqual(OPERATIONS.map((o) => `${o.method} ${o.path}`).sort());
    // each one but the export (which declares no answers, so as not to hide its 200) documents the 429 with its headers
    for (const [path, ops] of Object.entries(doc.paths)) {
      if (!path.startsWith('/api/') || path === EXPORT_PATH) continue;
      for (const [method, op] of Object.entries(ops as Record<string, { responses: Record<string, { headers?: object }> }>)) {
        expect({ op: `${method} ${path}`, headers: Object.keys(op.responses['429']?.headers ?? {}).sort() })
          .toEqual({ op: `${method} ${path}`, headers: ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after'] });
      }
    }
  });

  it('every /api/ operation (and HEAD of every GET) refuses a limited key 429 in its shape, whatever its body', async () => {
    freshMinute(20);
    await useUp(EXAMPLE.key);
    const message = 'rate limit exceeded: at most 2 requests per minute per API key; retry in 40 seconds';
    for (const op of OPERATIONS) {
      const withBody = op.method === 'POST' || op.method === 'PATCH';
      const res = await t.app.inject({
        method: op.method, url: op.url,
        headers: { 'x-api-key': EXAMPLE.key, ...(withBody ? { 'content-type': 'application/json' } : {}) },
        payload: withBody ? '{"not json' : undefined,
      });
      const expected = op.path === EXPORT_PATH ? { error: { code: 'RATE_LIMITED', message } } : { error: message };
      expect({ op: `${op.method} ${op.path}`, status: res.statusCode, body: res.json(), retryAfter: res.headers['retry-after'], remaining: res.headers['ratelimit-remaining'] })
        .toEqual({ op: `${op.method} ${op.path}`, status: 429, body: expected, retryAfter: '40', remaining: '0' });
      if (op.method === 'GET') {
        const head = await t.app.inject({ method: 'HEAD', url: op.url, headers: { 'x-api-key': EXAMPLE.key } });
        expect({ op: `HEAD ${op.path}`, status: head.statusCode }).toEqual({ op: `HEAD ${op.path}`, status: 429 });
      }
    }
  });

  it('a large body refused 429 before it is read: the keep-alive connection serves the next request (sent behind it or after the answer)', async () => {
    freshMinute(5);
    await useUp(EXAMPLE.key);
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((r) => socket.once('connect', () => r()));
    const answers = new AnswerReader(socket);
    try {
      const bulkHead = (length: number) => [
        'POST /api/v1/platform-templates/send-bulk/ HTTP/1.1', 'Host: localhost', `X-API-Key: ${EXAMPLE.key}`,
        'Content-Type: application/json', `Content-Length: ${length}`, '', '',
      ].join('\r\n');
      const get = (key: string) => `GET /api/v1/business-info/ HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${key}\r\n\r\n`;
      const body = Buffer.alloc(8 * 1024 * 1024, 'a'); // 8 MiB, under the bulk's own limit (32 MiB)

      // 1. pipelined: the whole body, then the next request right behind it
      socket.write(bulkHead(body.length));
      socket.write(body);
      socket.write(get(SECOND.key));
      const limited = await answers.next();
      expect({ status: limited.status, connection: limited.headers.connection, retryAfter: limited.headers['retry-after'] })
        .toEqual({ status: 429, connection: 'keep-alive', retryAfter: '55' });
      const next = await answers.next();
      expect({ status: next.status, name: JSON.parse(next.body).name }).toEqual({ status: 200, name: 'Ferreteria Sur' });

      // 2. the answer comes while most of the body is still to be sent; the rest and the next request follow it
      socket.write(bulkHead(body.length));
      socket.write(body.subarray(0, 64 * 1024));
      const early = await answers.next();
      expect(early.status).toBe(429);
      socket.write(body.subarray(64 * 1024));
      socket.write(get(SECOND.key));
      expect((await answers.next()).status).toBe(200);
      expect(answers.closed).toBe(false);
    } finally {
      socket.destroy();
    }
  });

  it('a keyed request refused 429 records nothing under its key: the same key next minute runs the request (201, not a replay)', async () => {
    freshMinute(30);
    await useUp(EXAMPLE.key);
    const phone = '+5491155559912';
    const upsert = () => t.app.inject({
      method: 'POST', url: '/api/v1/external/contacts/upsert/', payload: { phone, full_name: 'Limited' },
      headers: { 'x-api-key': EXAMPLE.key, 'idempotency-key': 'r12-limited-first' },
    });
    const refused = await upsert();
    expect({ status: refused.statusCode, replayed: refused.headers['idempotent-replayed'] }).toEqual({ status: 429, replayed: undefined });
    const recorded = async () => (await t.db.pool.query("SELECT count(*)::int AS n FROM public.idempotency_keys WHERE key = 'r12-limited-first'")).rows[0].n;
    expect(await recorded()).toBe(0);
    freshMinute(0);
    const lookup = await t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': EXAMPLE.key } });
    expect(lookup.json()).toEqual({ found: false, contact: null });
    const ran = await upsert();
    expect({ status: ran.statusCode, replayed: ran.headers['idempotent-replayed'], created: ran.json().created }).toEqual({ status: 201, replayed: undefined, created: true });
    expect(await recorded()).toBe(1);
    freshMinute(0);
    const again = await upsert();
    expect({ status: again.statusCode, replayed: again.headers['idempotent-replayed'] }).toEqual({ status: 201, replayed: 'true' });
  });
});
