import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { canonicalJsonIterative } from '../../src/shared/canonical-json';
import { LARGE_BODY_BYTES } from '../../src/shared/turns';
import { BULK_CO, bulkFixture, phones } from '../support/bulk';
import { createTestApp } from '../support/services';

// After the recipients' loops yielded (review-bulk-eventloop-create.test.ts), a send-bulk of 100,000 recipients still
// held the event loop in two single pieces before its handler: the global body scan (unstorable text, nesting) and,
// with an Idempotency-Key, the request's fingerprint (canonical JSON + SHA-256). A large body now goes through both
// in turns (docs/bulk.md, "Event loop"). Proven without timing, over real HTTP: the real turn-yielding functions are
// wrapped (not replaced); when one starts, a /healthz is sent to the same server, and it is answered before that
// function ends. Before the fix these functions did not exist on the request's path: nothing was sent, the test fails.

type Phase = 'scan' | 'fingerprint';
const probe = {
  onStart: undefined as ((phase: Phase, value: unknown) => void) | undefined,
  onEnd: undefined as ((phase: Phase) => void) | undefined,
  calls: { scan: 0, fingerprint: 0 } as Record<Phase, number>,
};
jest.mock('../../src/shared/storable', () => {
  const real = jest.requireActual('../../src/shared/storable');
  return {
    ...real,
    scanInTurns: async (...args: unknown[]) => {
      probe.calls.scan++;
      probe.onStart?.('scan', args[0]);
      try {
        return await real.scanInTurns(...args);
      } finally {
        probe.onEnd?.('scan');
      }
    },
  };
});
jest.mock('../../src/shared/canonical-json', () => {
  const real = jest.requireActual('../../src/shared/canonical-json');
  return {
    ...real,
    canonicalJsonInTurns: async (...args: unknown[]) => {
      probe.calls.fingerprint++;
      probe.onStart?.('fingerprint', args[0]);
      try {
        return await real.canonicalJsonInTurns(...args);
      } finally {
        probe.onEnd?.('fingerprint');
      }
    },
  };
});

type T = Awaited<ReturnType<typeof createTestApp>>;
const SEND_BULK = '/api/v1/platform-templates/send-bulk/';
// well over LARGE_BODY_BYTES; 100,000 took over 30 s on a loaded machine, past the server's idle-socket timeout
const N = 20_000;

function send(url: string, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, {
      method,
      headers: body === undefined ? headers : { 'x-api-key': BULK_CO.key, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers },
    }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8'), headers: res.headers }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const recipientsOf = (n: number, prefix: string) =>
  phones(n, prefix).map((phone, i) => ({ phone, variables: { name: `Cliente ${i}` }, button_variables: { button_0: `A${i}` } }));
const bulkBody = (recipients: unknown[]) =>
  JSON.stringify({ phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'order_update', recipients });

describe('a large body is scanned and fingerprinted in turns', () => {
  let t: T;
  let url: string;
  let order: string[];
  let healths: Array<Promise<unknown>>;
  let seen: Partial<Record<Phase, unknown>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2026-03-01T10:00:00.000Z') });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    order = [];
    healths = [];
    seen = {};
    probe.calls = { scan: 0, fingerprint: 0 };
    // when a turn-yielding walk starts: a /healthz to the same server, and a setImmediate
    probe.onStart = (phase, value) => {
      seen[phase] = value;
      setImmediate(() => order.push(`${phase}: immediate`));
      healths.push(send(url, 'GET', '/healthz').then((r) => {
        order.push(`${phase}: healthz ${r.status}`);
      }));
    };
    probe.onEnd = (phase) => order.push(`${phase}: end`);
  });
  afterAll(async () => {
    probe.onStart = undefined;
    probe.onEnd = undefined;
    await t?.close();
  });

  it('a keyed send-bulk of 20,000 recipients: /healthz answered during the scan and during the fingerprint; the stored fingerprint is the one-piece one', async () => {
    const payload = bulkBody(recipientsOf(N, '+54911750'));
    expect(Buffer.byteLength(payload)).toBeGreaterThan(LARGE_BODY_BYTES);
    const created = await send(url, 'POST', SEND_BULK, payload, { 'idempotency-key': 'eventloop2-big' });
    await Promise.all(healths);

    expect(created.status).toBe(202);
    expect(JSON.parse(created.body)).toMatchObject({ total_recipients: N, unique_recipients: N });
    expect(probe.calls).toEqual({ scan: 1, fingerprint: 1 });
    expect(order).toEqual(['scan: immediate', 'scan: healthz 200', 'scan: end', 'fingerprint: immediate', 'fingerprint: healthz 200', 'fingerprint: end']);

    // the fingerprint kept for the key is what the one-piece code (the first canonicalJson) gives for the validated body
    const expected = createHash('sha256').update(`POST ${SEND_BULK}\n{}\n${canonicalJsonIterative(seen.fingerprint)}`).digest('hex');
    const stored = await t.db.pool.query('SELECT fingerprint FROM public.idempotency_keys WHERE company_id = $1 AND key = $2', [BULK_CO.companyId, 'eventloop2-big']);
    expect(stored.rows).toEqual([{ fingerprint: expected }]);

    // the same key and body again: the stored answer (fingerprints equal); another body under the key: 422
    const replay = await send(url, 'POST', SEND_BULK, payload, { 'idempotency-key': 'eventloop2-big' });
    expect(replay.status).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toBe(created.body);
    const other = await send(url, 'POST', SEND_BULK, bulkBody(recipientsOf(N - 1, '+54911750')), { 'idempotency-key': 'eventloop2-big' });
    expect(other.status).toBe(422);
  });

  it('a large body with NUL text in its first recipient: 400 in the spec shape, /healthz answered during the scan, nothing created', async () => {
    const recipients = recipientsOf(20_000, '+54911751');
    (recipients[0].variables as Record<string, string>).name = 'a\u0000b'; // walked last (a stack)
    const before = await t.db.pool.query('SELECT count(*)::int AS n FROM es.events');
    const refused = await send(url, 'POST', SEND_BULK, bulkBody(recipients), { 'idempotency-key': 'eventloop2-nul' });
    await Promise.all(healths);

    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toEqual({ body: ['text must not contain NUL (\\u0000) characters or unpaired surrogates'] });
    expect(order).toEqual(['scan: immediate', 'scan: healthz 200', 'scan: end']);
    expect(probe.calls).toEqual({ scan: 1, fingerprint: 0 });
    expect((await t.db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows).toEqual(before.rows);
  });

  it('a large body nested too deeply: the depth 400; with NUL text too: the NUL 400 (as in one piece, whatever comes first)', async () => {
    const recipients: Array<Record<string, unknown>> = recipientsOf(20_000, '+54911752');
    recipients[recipients.length - 1].variables = { deep: JSON.parse('['.repeat(70) + ']'.repeat(70)) };
    const deep = await send(url, 'POST', SEND_BULK, bulkBody(recipients));
    expect(deep.status).toBe(400);
    expect(JSON.parse(deep.body)).toEqual({ body: ['nested too deeply (at most 64 levels of objects and lists)'] });

    recipients[0].variables = { name: '\ud800' }; // walked last (a stack): the deep list is met first
    const both = await send(url, 'POST', SEND_BULK, bulkBody(recipients));
    expect(both.status).toBe(400);
    expect(JSON.parse(both.body)).toEqual({ body: ['text must not contain NUL (\\u0000) characters or unpaired surrogates'] });
    expect(probe.calls).toEqual({ scan: 2, fingerprint: 0 });
  });

  it('a small keyed send-bulk takes the one-piece path (no turn-yielding walk), and its fingerprint is the one-piece one', async () => {
    const payload = bulkBody(recipientsOf(50, '+54911753'));
    expect(Buffer.byteLength(payload)).toBeLessThanOrEqual(LARGE_BODY_BYTES);
    const created = await send(url, 'POST', SEND_BULK, payload, { 'idempotency-key': 'eventloop2-small' });
    expect(created.status).toBe(202);
    expect(probe.calls).toEqual({ scan: 0, fingerprint: 0 });
    const body = { ...JSON.parse(payload) };
    const stored = await t.db.pool.query('SELECT fingerprint FROM public.idempotency_keys WHERE company_id = $1 AND key = $2', [BULK_CO.companyId, 'eventloop2-small']);
    expect(stored.rows).toHaveLength(1);
    // a replay of the same body matches it (and so does a reordered one: canonical JSON)
    const reordered = JSON.stringify({ recipients: body.recipients, template_name: body.template_name, phone_number_id: body.phone_number_id });
    const replay = await send(url, 'POST', SEND_BULK, reordered, { 'idempotency-key': 'eventloop2-small' });
    expect(replay.status).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });
});
