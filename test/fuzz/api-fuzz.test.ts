import type { InjectOptions } from 'fastify';
import fc from 'fast-check';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { signWebhook } from '../../src/shared/provider-webhook';
import { EXAMPLE, exampleFixture, secondCompany } from '../support/provisioning';
import { createTestApp } from '../support/services';
import {
  A_NUMBER, B_NUMBER, BULK_BODY, SEND_BODY, UPSERT_BODY, apiKey, contentType, enc, jsonValueText, keyHeader, mutatedBody, nastyString, queryString, withQuery,
} from './arbitraries';
import { checkedInject } from './support';

// Bad-input fuzzing of every public endpoint and of the webhook ingress (issue #8, docs/reliability.md).
// Properties: every answer is a 2xx or a documented 4xx with the spec's body shape, never a 5xx, never a hang,
// and a rejected request leaves the event log unchanged. fast-check runs are bounded (RUNS) so the suite stays a
// normal part of `npm test`; FUZZ_RUNS raises them for a longer local hunt, FUZZ_SEED replays a failure.

const RUNS = Number(process.env.FUZZ_RUNS ?? 40);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
const params = { numRuns: RUNS, seed: SEED, endOnFailure: true } as const;

const APP_SECRET = 'test-app-secret';

type T = Awaited<ReturnType<typeof createTestApp>>;

// ---------- the suite ----------

describe('fuzz: bad input never produces a 5xx, a hang, a wrong error shape or an event', () => {
  let t: T;
  let bulkA = '';
  let messageA = '';

  beforeAll(async () => {
    t = await createTestApp();
    const doc = exampleFixture({ keepContacts: true });
    doc.companies.push(secondCompany());
    await seedFixture(t.services, doc, { actor: 'test' });
    const send = await t.app.inject({ method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': EXAMPLE.key }, payload: SEND_BODY });
    expect(send.statusCode).toBe(200);
    messageA = send.json().message_id;
    const bulk = await t.app.inject({ method: 'POST', url: '/api/v1/platform-templates/send-bulk/', headers: { 'x-api-key': EXAMPLE.key }, payload: BULK_BODY });
    expect(bulk.statusCode).toBe(202);
    bulkA = bulk.json().bulk_send_id;
  });
  afterAll(async () => {
    await t?.close();
  });

  const inject = (o: InjectOptions) => checkedInject(t.app, t.db.pool, o);

  const GETS: Array<[string, readonly string[]]> = [
    ['/api/v1/business-info/', ['x']],
    ['/api/v1/business-hours/', ['from', 'to']],
    ['/api/v1/holidays/', ['from', 'to']],
    ['/api/v1/business-accounts/', ['page']],
    ['/api/v1/platform-templates/bulk-sends/', ['status', 'template', 'created_after', 'created_before', 'page', 'page_size']],
    ['/api/v1/contact-lookup/', ['phone']],
    ['/api/v1/external/contacts/', ['phone']],
    ['/api/v1/qualitative-export/messages', ['company_id', 'from', 'to', 'channel', 'agent_id', 'direction', 'include', 'cursor', 'limit']],
  ];

  describe.each(GETS)('GET %s', (path, names) => {
    it('random and adversarial query strings and keys', async () => {
      await fc.assert(fc.asyncProperty(queryString(names), apiKey, async (qs, key) => {
        await inject({ method: 'GET', url: withQuery(path, qs), headers: keyHeader(key) });
      }), params);
    });
  });

  it('GET bulk-sends detail / messages and POST cancel with adversarial ids and queries', async () => {
    const id = fc.oneof(
      fc.constant('__A__'),
      nastyString.map((s) => enc(s.slice(0, 600))),
      fc.constantFrom('%', '%zz', '..', '.', '%2F', 'a%00b', '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-4fff-bfff-ffffffffffff', 'x'.repeat(600)),
    );
    const sub = fc.constantFrom('', 'messages/', 'cancel/');
    await fc.assert(fc.asyncProperty(id, sub, queryString(['status', 'page', 'page_size']), apiKey, async (rawId, s, qs, key) => {
      const idPart = rawId === '__A__' ? bulkA : rawId;
      const url = withQuery(`/api/v1/platform-templates/bulk-sends/${idPart}/${s}`, qs);
      await inject({ method: s === 'cancel/' ? 'POST' : 'GET', url, headers: keyHeader(key) });
    }), params);
  });

  it('GET messages/{message_id}/ with adversarial ids', async () => {
    const id = fc.oneof(
      fc.constant('__A__'),
      nastyString.map((s) => enc(s.slice(0, 600))),
      fc.constantFrom('%', '%zz', '..', '%2F', 'a%00b', 'wamid.x', 'x'.repeat(600)),
    );
    await fc.assert(fc.asyncProperty(id, queryString(['x']), apiKey, async (rawId, qs, key) => {
      const idPart = rawId === '__A__' ? encodeURIComponent(messageA) : rawId;
      await inject({ method: 'GET', url: withQuery(`/api/v1/platform-templates/messages/${idPart}/`, qs), headers: keyHeader(key) });
    }), params);
  });

  const POSTS: Array<[string, Record<string, unknown>]> = [
    ['/api/v1/platform-templates/send/', SEND_BODY],
    ['/api/v1/platform-templates/send-bulk/', BULK_BODY],
    ['/api/v1/external/contacts/upsert/', UPSERT_BODY],
  ];

  describe.each(POSTS)('POST %s', (path, base) => {
    it('mutated, random and malformed bodies, content types and keys', async () => {
      await fc.assert(fc.asyncProperty(mutatedBody(base), contentType, apiKey, queryString(['x']), async (payload, ct, key, qs) => {
        const headers = keyHeader(key);
        if (ct !== undefined) headers['content-type'] = ct;
        await inject({ method: 'POST', url: withQuery(path, qs), headers, payload });
      }), params);
    });

    it('a 10 MB body: over the 1 MiB limit 413; send-bulk (32 MiB limit) answers without a 5xx, and 40 MB is 413', async () => {
      const headers = { 'x-api-key': EXAMPLE.key, 'content-type': 'application/json' };
      const big = JSON.stringify({ ...base, padding: 'x'.repeat(10 * 1024 * 1024) });
      const res = await inject({ method: 'POST', url: path, headers, payload: big });
      if (path.endsWith('/send-bulk/')) {
        const huge = JSON.stringify({ ...base, padding: 'x'.repeat(40 * 1024 * 1024) });
        expect((await inject({ method: 'POST', url: path, headers, payload: huge })).statusCode).toBe(413);
      } else {
        expect(res.statusCode).toBe(413);
      }
    });

    it('B\'s phone number id from A\'s key is a 4xx', async () => {
      const res = await inject({
        method: 'POST', url: path, headers: { 'x-api-key': EXAMPLE.key },
        payload: JSON.stringify({ ...base, phone_number_id: B_NUMBER, template_name: 'stock_alert' }),
      });
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
    });
  });

  it('NUL bytes, lone surrogates and huge strings in every string field and query parameter', async () => {
    const values = ['a\u0000b', '\ud800', '\u0000', 'x'.repeat(300_000)];
    const stringFields = (o: Record<string, unknown>, prefix: string[] = []): string[][] =>
      Object.entries(o).flatMap(([k, v]) => (typeof v === 'string' ? [[...prefix, k]] : v && typeof v === 'object' && !Array.isArray(v) ? stringFields(v as Record<string, unknown>, [...prefix, k]) : []));
    for (const [path, base] of POSTS) {
      const targets = [...stringFields(base), ['recipients', '0', 'phone'], ['custom_fields', '0', 'key'], ['custom_fields', '0', 'value', '0'], ['variables', 'patient_name']];
      for (const target of targets) {
        for (const v of values) {
          const body = JSON.parse(JSON.stringify(base));
          let node = body;
          for (const k of target.slice(0, -1)) node = node?.[k];
          if (!node || typeof node !== 'object') continue;
          node[target[target.length - 1]] = v;
          await inject({ method: 'POST', url: path, headers: { 'x-api-key': EXAMPLE.key, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
        }
      }
    }
    for (const [path, names] of GETS) {
      for (const name of names) {
        for (const v of values) {
          await inject({ method: 'GET', url: `${path}?${name}=${enc(v)}`, headers: { 'x-api-key': EXAMPLE.key } });
        }
      }
    }
    for (const v of values) {
      await inject({ method: 'GET', url: `/api/v1/platform-templates/bulk-sends/?status=QUEUED&created_after=${enc(v)}`, headers: { 'x-api-key': EXAMPLE.key } });
      await inject({ method: 'GET', url: `/api/v1/platform-templates/bulk-sends/${bulkA}/messages/?status=${enc(v)}`, headers: { 'x-api-key': EXAMPLE.key } });
    }
  });

  it('wrong methods and unknown paths answer 404 {error}', async () => {
    const method = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS') as fc.Arbitrary<'GET'>;
    const path = fc.oneof(
      fc.constantFrom('/api/v1/business-info', '/api/v1/', '/api/v2/business-info/', '/api/v1/platform-templates/send', '/api/v1/holidays/x/', '//', '/%', '/api/v1/external/contacts/upsert'),
      nastyString.map((s) => `/api/v1/${enc(s.slice(0, 200))}/`),
    );
    await fc.assert(fc.asyncProperty(method, path, apiKey, async (m, p, key) => {
      await inject({ method: m, url: p, headers: keyHeader(key) });
    }), params);
  });

  describe('webhook ingress', () => {
    it('GET handshake with adversarial query strings', async () => {
      await fc.assert(fc.asyncProperty(queryString(['hub.mode', 'hub.verify_token', 'hub.challenge']), async (qs) => {
        await inject({ method: 'GET', url: withQuery('/webhooks/provider', qs) });
      }), params);
    });

    it('POST with unsigned, badly signed and garbage bodies', async () => {
      const sig = fc.constantFrom<string | undefined>(undefined, '', 'sha256=', 'sha256=00', 'sha1=abc', 'sha256=' + 'g'.repeat(64), 'x'.repeat(5000));
      await fc.assert(fc.asyncProperty(jsonValueText, sig, contentType, async (payload, s, ct) => {
        const headers: Record<string, string> = {};
        if (s !== undefined) headers['x-hub-signature-256'] = s;
        if (ct !== undefined) headers['content-type'] = ct;
        await inject({ method: 'POST', url: '/webhooks/provider', headers, payload });
      }), params);
    });

    it('POST correctly signed adversarial notifications', async () => {
      const status = fc.record({
        id: fc.oneof(fc.constant(messageA), nastyString),
        status: fc.oneof(fc.constantFrom('sent', 'delivered', 'read', 'failed', 'deleted'), nastyString),
        timestamp: fc.oneof(fc.constant('1772359200'), nastyString, fc.integer().map((n) => n as unknown as string)),
        recipient_id: nastyString,
        errors: fc.oneof(fc.constant(undefined), fc.jsonValue({ maxDepth: 3 })),
      }, { requiredKeys: [] });
      const value = fc.record({
        metadata: fc.oneof(fc.record({ phone_number_id: fc.oneof(fc.constant(A_NUMBER), nastyString) }), fc.jsonValue({ maxDepth: 2 })),
        statuses: fc.oneof(fc.array(status, { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })),
        messages: fc.oneof(fc.constant(undefined), fc.array(fc.jsonValue({ maxDepth: 3 }), { maxLength: 2 })),
      }, { requiredKeys: [] });
      const body = fc.oneof(
        fc.record({
          object: fc.oneof(fc.constant('whatsapp_business_account'), nastyString),
          entry: fc.oneof(
            fc.array(fc.record({ id: nastyString, changes: fc.oneof(fc.array(fc.record({ field: fc.constantFrom('messages', 'x'), value }), { maxLength: 2 }), fc.jsonValue({ maxDepth: 2 })) }, { requiredKeys: [] }), { maxLength: 2 }),
            fc.jsonValue({ maxDepth: 2 }),
          ),
        }, { requiredKeys: [] }).map((v) => JSON.stringify(v)),
        jsonValueText,
      );
      await fc.assert(fc.asyncProperty(body, async (raw) => {
        await inject({
          method: 'POST', url: '/webhooks/provider',
          headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) },
          payload: raw,
        });
      }), params);
    });

    it('a 10 MB webhook body is refused with 413 and nothing is recorded', async () => {
      const raw = JSON.stringify({ object: 'x', entry: [], padding: 'x'.repeat(10 * 1024 * 1024) });
      const res = await inject({
        method: 'POST', url: '/webhooks/provider',
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) }, payload: raw,
      });
      expect(res.statusCode).toBe(413);
    });
  });
});
