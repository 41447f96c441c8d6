import type { InjectOptions } from 'fastify';
import fc from 'fast-check';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { keyedSendId } from '../../src/commands/send/keyed';
import { EXAMPLE, SECOND, countEvents, exampleFixture, secondCompany } from '../support/provisioning';
import { createTestApp } from '../support/services';
import {
  B_NUMBER, BULK_BODY, SEND_BODY, UPSERT_BODY, apiKey, contentType, enc, jsonValueText, keyHeader, mutatedBody, nastyString, queryString, withQuery,
} from './arbitraries';
import { type Checked, checkedInject, familyOf } from './support';

// Bad-input fuzzing of the two features added after api-fuzz.test.ts: the webhook-endpoint API (docs/webhooks.md)
// and the Idempotency-Key header (docs/idempotency.md). Every request goes through checkedInject (never a 5xx or a
// hang, only documented 4xx statuses, the route family's error shape, no event appended by a rejected request);
// on top of that each property checks what the docs promise: URLs under the DEFAULT address rules (https only,
// public unicast only), company isolation of endpoint ids, and the key's replay / 422 / 400 semantics.
// FUZZ_RUNS (default 40 per property) extends a run, FUZZ_SEED replays a failure.

const RUNS = Number(process.env.FUZZ_RUNS ?? 40);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
const params = { numRuns: RUNS, seed: SEED, endOnFailure: true } as const;

type T = Awaited<ReturnType<typeof createTestApp>>;
type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

const BASE = '/api/v1/webhook-endpoints/';
const CANCEL = (id: string) => `/api/v1/platform-templates/bulk-sends/${id}/cancel/`;
/** docs/webhooks.md, "Event catalogue" (webhook.test is sent only by POST .../test/) */
const CATALOGUE = ['message.sent', 'message.delivered', 'message.read', 'message.failed', 'bulk_send.started', 'bulk_send.completed', 'contact.upserted'];
const KEY_FORMAT_ERROR = 'Idempotency-Key must be 1 to 255 printable ASCII characters.';
const KEY_SENT_TWICE_ERROR = 'Idempotency-Key must be sent once.';
const KEY_REUSED_ERROR = 'This Idempotency-Key was already used with a different request.';
/** docs/idempotency.md: answers are kept for replays except 5xx, 400, 404 and 429 */
const kept = (status: number) => status < 500 && status !== 400 && status !== 404 && status !== 429;
/** docs/idempotency.md: the single send keeps its keys in its own streams, apart from the other routes' key records */
const SEND_ROUTE = '/api/v1/platform-templates/send/';
const sharesKeysWith = (a: string, b: string) => (a === SEND_ROUTE) === (b === SEND_ROUTE);
/** docs/idempotency.md, "Format" */
const VALID_KEY = /^[\x20-\x7e]{1,255}$/;
const COMPANY_OF: Record<string, number> = { [EXAMPLE.key]: EXAMPLE.companyId, [SECOND.key]: SECOND.companyId };
const JSON_TYPES = new Set(['application/json', 'application/json; charset=utf-8']);

// ---------- webhook URLs, labelled by what docs/webhooks.md ("Safety") says of them under the default rules ----------

/** ok: must be accepted; refused: must be 400; either: only the invariants (the docs do not say). */
type Verdict = 'ok' | 'refused' | 'either';
const worst = (...vs: Verdict[]): Verdict => (vs.includes('refused') ? 'refused' : vs.includes('either') ? 'either' : 'ok');
const label = (v: Verdict, xs: string[]) => xs.map((x) => [x, v] as [string, Verdict]);

const SCHEMES: Array<[string, Verdict]> = [
  ...label('ok', ['https://', 'https://', 'https://', 'https://', 'https://', 'HTTPS://', 'hTtPs://', 'https:', 'https:/', 'https:\\\\', 'https:///']),
  ...label('refused', ['http://', 'HTTP://', 'ftp://', 'ws://', 'wss://', 'file://', 'javascript://', 'data://', 'gopher://', '//', '', 'https//', 'htps://', 'https;//', 'https\u0000://']),
];
const USERINFO: Array<[string, Verdict]> = [
  ['', 'ok'],
  ...label('refused', ['user@', 'user:pass@', ':pass@', 'a%40b:c@', 'admin:@', `${'u'.repeat(300)}:p@`]),
  ...label('either', ['@', ':@']),
];
const HOSTS: Array<[string, Verdict]> = [
  ...label('ok', [
    'hooks.example.com', 'HOOKS.EXAMPLE.COM', 'example.org', 'a.b.c.d.example.net', '8.8.8.8', '1.1.1.1', '93.184.216.34', '11.0.0.1', '172.32.0.1',
    '100.128.0.1', '169.255.0.1', '192.169.0.1', '[2606:4700:4700::1111]', '[2001:4860:4860::8888]', '[64:ff9b::808:808]', '[2002:808:808::]',
    'bücher.example', 'xn--bcher-kva.example', '☃.net', 'localhost.example.com', 'notlocalhost.com', 'localhostx.com', '127.0.0.1.nip.io', 'x'.repeat(63) + '.com',
  ]),
  ...label('refused', [
    // loopback, in every spelling the URL parser turns into 127.0.0.1
    '127.0.0.1', '127.1', '127.255.255.254', '2130706433', '0x7f000001', '0177.0.0.1', '0x7f.1', '127.0.0.1.', '%31%32%37.0.0.1', '127.0.\n0.1',
    // private, link-local (cloud metadata), carrier-grade NAT, unspecified, multicast, broadcast, reserved, documentation, benchmarking
    '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.254', '192.168.1.1', '169.254.169.254', '100.64.0.1', '100.127.255.254', '0.0.0.0', '0',
    '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255', '192.0.0.1', '192.0.2.1', '198.51.100.7', '203.0.113.9', '198.18.0.1', '192.88.99.1',
    // IPv6: loopback, unspecified, link-local, unique local, multicast, IPv4-mapped / NAT64 / 6to4 of private IPv4, IPv4-compatible, documentation, Teredo
    '[::1]', '[0:0:0:0:0:0:0:1]', '[::]', '[fe80::1]', '[fc00::1]', '[fd12:3456:789a::1]', '[ff02::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]',
    '[::ffff:10.0.0.1]', '[::ffff:169.254.169.254]', '[0:0:0:0:0:ffff:a9fe:a9fe]', '[64:ff9b::a9fe:a9fe]', '[64:ff9b::10.0.0.1]', '[2002:a00:1::]',
    '[2002:7f00:1::]', '[::127.0.0.1]', '[2001:db8::1]', '[fec0::1]', '[100::1]', '[2001::1]', '[::ffff:0:7f00:1]', '[2001:20::1]',
    // localhost, names under it, fully qualified, and spellings the URL parser maps onto them
    'localhost', 'LOCALHOST', 'LocalHost', 'foo.localhost', 'a.b.localhost', 'localhost.', 'LOCALHOST.', 'foo.localhost.', 'localhost%2e', 'local\thost',
    'ｌｏｃａｌｈｏｓｔ', 'ⓛocalhost',
    // not a host at all
    'xn--', '[fe80::1%25eth0]', '[::1', '1.2.3.4.5', '256.0.0.1', 'exa mple.com', 'a<b', '%', '[]', '0x100000000',
  ]),
  // no host: the URL parser may take the path for one (https:///in is https://in/)
  ...label('either', ['a..b', 'xn--nxasmq6b.example', '']),
];
const PORTS: Array<[string, Verdict]> = [
  ['', 'ok'], ['', 'ok'], ['', 'ok'], ['', 'ok'], ...label('ok', [':443', ':8443', ':1', ':65535', ':']),
  ...label('refused', [':65536', ':-1', ':99999999999', ':abc', ':1.5', ':0x50', ': 443']),
  [':0', 'refused'],
];
const PATHS = ['', '/', '/in', '/in?x=1#frag', '/%2e%2e/%2e%2e/etc/passwd', '/ünï/☃', '\\in', '/a b', '/?q=' + 'a'.repeat(1990), '/?q=' + 'a'.repeat(2100)];
const WRAPS = ['', '', '', ' ', '\n', '\t', ' \u00a0', '\u3000'];

/** One part of a URL, its kinds weighted so that a fair share of whole URLs come out acceptable (about a quarter). */
function part(table: Array<[string, Verdict]>, weights: Record<Verdict, number>): fc.Arbitrary<[string, Verdict]> {
  const of = (v: Verdict) => table.filter(([, x]) => x === v);
  return fc.oneof(...(['ok', 'refused', 'either'] as const).filter((v) => of(v).length > 0 && weights[v] > 0)
    .map((v) => ({ weight: weights[v], arbitrary: fc.constantFrom(...of(v)) })));
}

/** A URL with its verdict: the worst of its parts', and refused over 2048 characters (the documented length is the zod max). */
const labelledUrl = fc.record({
  scheme: part(SCHEMES, { ok: 6, refused: 2, either: 0 }), user: part(USERINFO, { ok: 8, refused: 1, either: 1 }),
  host: part(HOSTS, { ok: 4, refused: 4, either: 1 }), port: part(PORTS, { ok: 8, refused: 1, either: 1 }),
  path: fc.constantFrom(...PATHS), wrap: fc.constantFrom(...WRAPS),
}).map(({ scheme, user, host, port, path, wrap }) => {
  const url = `${wrap}${scheme[0]}${user[0]}${host[0]}${port[0]}${path}${wrap}`;
  const verdict = url.trim().length > 2048 ? 'refused' : worst(scheme[1], user[1], host[1], port[1]);
  return { url, verdict };
});

// ---------- webhook-endpoint bodies ----------

const hasNulOrLoneSurrogate = (s: string) => /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
const notCatalogue = fc.oneof(
  fc.constantFrom('MESSAGE.SENT', 'message.*', '*', '', 'message.sent ', ' message.sent', 'message.Sent', 'message', 'message.bounced', 'bulk_send', 'contact.deleted'),
  nastyString,
).filter((s) => !CATALOGUE.includes(s));

const eventTypes: fc.Arbitrary<{ value: unknown; verdict: Verdict }> = fc.oneof(
  { weight: 14, arbitrary: fc.subarray(CATALOGUE, { minLength: 1 }).map((value) => ({ value, verdict: 'ok' as Verdict })) },
  { weight: 2, arbitrary: fc.array(fc.constantFrom(...CATALOGUE), { minLength: 2, maxLength: 40 }).map((value) => ({ value, verdict: 'ok' as Verdict })) },
  { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((n) => ({ value: Array(n).fill('message.read'), verdict: 'ok' as Verdict })) },
  { weight: 1, arbitrary: fc.constant({ value: [], verdict: 'refused' as Verdict }) },
  { weight: 3, arbitrary: fc.tuple(fc.subarray(CATALOGUE), notCatalogue, fc.nat()).map(([ok, bad, at]) => {
    const value = [...ok];
    value.splice(at % (value.length + 1), 0, bad);
    return { value, verdict: 'refused' as Verdict };
  }) },
  { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((n) => ({ value: [...Array(n).fill('message.read'), 'nope'], verdict: 'refused' as Verdict })) },
  { weight: 2, arbitrary: fc.oneof(fc.constant('message.sent'), fc.constant(null), fc.integer(), fc.boolean(), fc.constant({ 0: 'message.sent' }), fc.constant([1]), fc.constant([null]), fc.constant([['message.sent']]), fc.constant(['message.sent', 2]))
    .map((value) => ({ value, verdict: 'refused' as Verdict })) },
  { weight: 1, arbitrary: fc.constant({ value: ['webhook.test'], verdict: 'either' as Verdict }) },
);

const ABSENT = Symbol('absent');
const description: fc.Arbitrary<{ value: unknown; verdict: Verdict }> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ value: ABSENT, verdict: 'ok' as Verdict }) },
  fc.constant({ value: null, verdict: 'ok' as Verdict }),
  fc.oneof(fc.string({ maxLength: 60 }), fc.string({ unit: 'grapheme', maxLength: 60 }), fc.string({ unit: 'binary', maxLength: 60 }), nastyString, fc.constant('x'.repeat(500)), fc.constant('x'.repeat(501)))
    // docs/webhooks.md: at most 500 characters
    .map((value) => ({ value, verdict: (hasNulOrLoneSurrogate(value) || value.length > 500 ? 'refused' : 'ok') as Verdict })),
  fc.oneof(fc.integer(), fc.boolean(), fc.constant([]), fc.constant({}), fc.constant(['CRM'])).map((value) => ({ value, verdict: 'refused' as Verdict })),
);

const urlValue: fc.Arbitrary<{ value: unknown; verdict: Verdict }> = fc.oneof(
  { weight: 4, arbitrary: fc.webUrl({ validSchemes: ['https'], withQueryParameters: true, withFragments: true }).map((value) => ({ value, verdict: 'either' as Verdict })) },
  { weight: 12, arbitrary: labelledUrl.map(({ url, verdict }) => ({ value: url, verdict })) },
  { weight: 20, arbitrary: fc.constantFrom('https://hooks.example.com/in', 'https://crm.example.org:8443/hooks?src=switchboard', 'https://8.8.8.8/x').map((value) => ({ value, verdict: 'ok' as Verdict })) },
  { weight: 1, arbitrary: nastyString.map((value) => ({ value, verdict: 'either' as Verdict })) },
  { weight: 1, arbitrary: fc.integer({ min: 2049, max: 300_000 }).map((n) => ({ value: `https://hooks.example.com/${'a'.repeat(n)}`, verdict: 'refused' as Verdict })) },
  { weight: 1, arbitrary: fc.oneof(fc.constant(null), fc.integer(), fc.constant(['https://hooks.example.com/']), fc.constant({ href: 'https://hooks.example.com/' }), fc.constant(''), fc.constant('   ')).map((value) => ({ value, verdict: 'refused' as Verdict })) },
);

type Labelled = { value: unknown; verdict: Verdict };
const acceptable = (a: fc.Arbitrary<Labelled>) => a.filter((x) => x.verdict === 'ok');
interface BodyParts { url?: Labelled; types?: Labelled; description: Labelled; extra: [string, unknown] | null }
function bodyOf({ url, types, description: d, extra }: BodyParts) {
  const body: Record<string, unknown> = {};
  if (url) body.url = url.value;
  if (types) body.event_types = types.value;
  if (d.value !== ABSENT) body.description = d.value;
  let raw = JSON.stringify(body);
  if (extra) raw = raw.replace(/}$/, `${raw === '{}' ? '' : ','}${JSON.stringify(extra[0])}:${JSON.stringify(extra[1]) ?? 'null'}}`);
  const verdict = worst(url?.verdict ?? 'refused', types?.verdict ?? 'refused', d.verdict, extra ? 'either' : 'ok');
  return { raw, body, verdict };
}
/**
 * A structured create body with its verdict: a third made of acceptable parts only (must be 201), the rest free
 * combinations (a missing url or event_types is refused; an unknown key only gets the invariants: the docs do not say).
 */
const createBody = fc.oneof(
  { weight: 1, arbitrary: fc.record({ url: acceptable(urlValue), types: acceptable(eventTypes), description: acceptable(description), extra: fc.constant(null) }).map(bodyOf) },
  { weight: 2, arbitrary: fc.record({
    url: fc.option(urlValue, { nil: undefined, freq: 20 }),
    types: fc.option(eventTypes, { nil: undefined, freq: 20 }),
    description,
    extra: fc.option(fc.tuple(fc.constantFrom('secret', 'id', 'enabled', 'company_id', 'eventTypes', 'URL', '__proto__'), fc.jsonValue({ maxDepth: 1 })), { freq: 8 }),
  }).map(bodyOf) },
);

const WEBHOOK_BODY = { url: 'https://hooks.example.com/in', event_types: ['message.delivered', 'message.read'], description: 'CRM' };
const PATCH_BODY = { url: 'https://hooks.example.com/patched', event_types: ['message.sent'], description: 'patched', enabled: true };

// ---------- Idempotency-Key header values ----------

let nonce = 0;
/** A key no earlier request of this process used (shrinking and replays of a seed re-run properties: keys must not collide). */
const fresh = (prefix: string, length?: number) => {
  const tag = `~${process.pid}.${++nonce}`;
  const head = length === undefined ? prefix.slice(0, 255 - tag.length) : prefix.padEnd(length - tag.length, 'k').slice(0, length - tag.length);
  return head + tag;
};

const printableChar = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
const keyPrefix = fc.oneof(
  fc.string({ unit: printableChar, maxLength: 40 }),
  fc.uuid(),
  fc.constantFrom('"abc"', "'abc'", '""', ' ', '  lead', 'trail  ', ',', ';', '\\', 'a, b', '=', '%00', '%C3%A9', '<script>', '*', 'null'),
);
const BAD_CHARS = ['\u0000', '\u0001', '\t', '\n', '\r', '\u001f', '\u007f', 'é', '€', '\u00a0', '\u0085', '\u2028', '\ud800', '😀', 'ｋ', '\u200b'];

type KeySpec =
  | { t: 'valid'; prefix: string; length?: number }
  | { t: 'empty' }
  | { t: 'long'; prefix: string; length: number }
  | { t: 'bad-char'; prefix: string; ch: string; at: number }
  | { t: 'array'; parts: KeySpec[] };

const validSpec: fc.Arbitrary<KeySpec> = fc.record({ prefix: keyPrefix, length: fc.option(fc.constantFrom(1, 254, 255), { freq: 5, nil: undefined }) })
  .map(({ prefix, length }) => ({ t: 'valid' as const, prefix, length }));
const malformedSpec: fc.Arbitrary<KeySpec> = fc.oneof(
  fc.constant({ t: 'empty' as const }),
  fc.record({ prefix: keyPrefix, length: fc.oneof(fc.constant(256), fc.integer({ min: 256, max: 9000 })) }).map((r) => ({ t: 'long' as const, ...r })),
  fc.record({ prefix: keyPrefix, ch: fc.constantFrom(...BAD_CHARS), at: fc.nat() }).map((r) => ({ t: 'bad-char' as const, ...r })),
);
const leafSpec = fc.oneof({ weight: 1, arbitrary: validSpec }, { weight: 2, arbitrary: malformedSpec });
/** Valid and malformed header values, and the header sent two or three times (malformed whatever the values). */
const keySpec: fc.Arbitrary<KeySpec> = fc.oneof(
  { weight: 3, arbitrary: leafSpec },
  { weight: 1, arbitrary: fc.array(fc.oneof(leafSpec, fc.constant({ t: 'valid' as const, prefix: '' })), { minLength: 2, maxLength: 3 }).map((parts) => ({ t: 'array' as const, parts })) },
);

function resolveKey(spec: KeySpec): string | string[] {
  switch (spec.t) {
    case 'valid': return fresh(spec.prefix, spec.length);
    case 'empty': return '';
    case 'long': return fresh(spec.prefix).padEnd(spec.length, 'k');
    case 'bad-char': {
      const k = fresh(spec.prefix);
      const at = spec.at % (k.length + 1);
      return k.slice(0, at) + spec.ch + k.slice(at);
    }
    case 'array': return spec.parts.map((p) => resolveKey(p) as string);
  }
}
/** docs/idempotency.md, "Format": one header of 1 to 255 printable ASCII characters (sent twice: 400). */
const isMalformed = (v: string | string[]): boolean => Array.isArray(v) || !VALID_KEY.test(v);
const formatErrorOf = (v: string | string[]) => (Array.isArray(v) ? KEY_SENT_TWICE_ERROR : KEY_FORMAT_ERROR);
const headerName = fc.constantFrom('idempotency-key', 'Idempotency-Key', 'IDEMPOTENCY-KEY');

// ---------- the keyed routes: valid requests (distinct for distinct n) and junk ----------

interface Req {
  url: string;
  /** raw JSON text, or undefined for no body */
  raw?: string;
}

/**
 * Distinct for n in 0..99,999. For n 0..3 the number ends in 0000, which the sandbox provider refuses (docs/sends.md:
 * a refusal is a 422 that is recorded, and kept under a key like any 422).
 */
const phoneOf = (n: number) => (n < 4 ? `+54911500${n}0000` : `+5491155${String(n % 100_000).padStart(5, '0')}1`);
/** The same keys in reverse order at every depth: the same request after validation (docs: canonical JSON). */
const reversed = (v: unknown): unknown => (Array.isArray(v) ? v.map(reversed) : v && typeof v === 'object'
  ? Object.fromEntries(Object.entries(v as Record<string, unknown>).reverse().map(([k, x]) => [k, reversed(x)])) : v);

describe('fuzz: webhook endpoints and Idempotency-Key never answer a 5xx, a wrong shape or an undocumented status, and keep their promises', () => {
  let t: T;
  let idA = '';
  let idB = '';
  let idGone = '';
  let deliveryA = '';
  let deliveryB = '';
  let victim: string | undefined;
  const A_BULKS = 120;
  const bulksA: string[] = [];
  /** A's endpoints for the keyed rotate-secret and test requests (a distinct endpoint is a distinct request) */
  const endpointsA: string[] = [];
  /** deliveries of A's endpoint idA for the keyed retry requests (a distinct delivery is a distinct request) */
  const deliveriesA: string[] = [];
  let bulkB = '';

  const inject = (o: InjectOptions) => checkedInject(t.app, t.db.pool, o);
  const json = (key: string) => ({ 'x-api-key': key, 'content-type': 'application/json' });
  const createEndpoint = async (key: string, body: unknown = WEBHOOK_BODY) => {
    const res = await t.app.inject({ method: 'POST', url: BASE, headers: json(key), payload: JSON.stringify(body) });
    expect(res.statusCode).toBe(201);
    return res.json().id as string;
  };
  const keyCount = async () => (await t.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM public.idempotency_keys')).rows[0].n;
  type KeyRecord = { state: string; status_code: number | null } | undefined;
  /** what the key holds on the route `url`: its row, or for a send its last attempt's stream (docs/sends.md) */
  const recordOf = async (companyId: number, key: string, url: string): Promise<KeyRecord> => {
    if (url !== SEND_ROUTE) {
      // an answer is kept sealed (state 'sealed'): for this model it is completed
      return (await t.db.pool.query<{ state: string; status_code: number | null }>(
        `SELECT CASE state WHEN 'sealed' THEN 'completed' ELSE state END AS state, status_code FROM public.idempotency_keys WHERE company_id = $1 AND key = $2`,
        [companyId, key])).rows[0];
    }
    let last: KeyRecord;
    for (let attempt = 0; ; attempt++) {
      const { rows } = await t.db.pool.query<{ type: string; data: { retryable?: boolean } }>(
        'SELECT type, data FROM es.events WHERE stream_id = $1 ORDER BY stream_revision', [`send-${keyedSendId(companyId, key, attempt)}`]);
      if (rows.length === 0) return last;
      const rejected = rows.find((r) => r.type === 'TemplateSendRejected');
      last = rows.some((r) => r.type === 'TemplateSendAccepted') ? { state: 'completed', status_code: 200 }
        : rejected ? (rejected.data.retryable ? undefined : { state: 'completed', status_code: 422 })
        : { state: 'in_flight', status_code: null };
    }
  };
  const otherCompanysEndpoints = async (companyId: number) =>
    new Set((await t.db.pool.query<{ endpoint_id: string }>('SELECT endpoint_id FROM rm_webhooks.endpoints WHERE company_id <> $1', [companyId])).rows.map((r) => r.endpoint_id));
  const deliveriesOf = async (endpointId: string) =>
    (await t.db.pool.query('SELECT delivery_id, status, attempts, next_attempt_at, completed_at FROM webhooks.deliveries WHERE endpoint_id = $1 ORDER BY delivery_id', [endpointId])).rows;

  beforeAll(async () => {
    // the DEFAULT rules (private addresses and plain http refused), spelled out so a changed default cannot widen them
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'false', WEBHOOKS_ALLOW_HTTP: 'false', WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '100000' } });
    expect(t.services.config.webhooks).toEqual({ allowPrivateUrls: false, allowHttp: false, retentionDays: 30, maxEndpointsPerCompany: 100000 });
    const doc = exampleFixture({ keepContacts: true });
    doc.companies.push(secondCompany());
    await seedFixture(t.services, doc, { actor: 'test' });
    idA = await createEndpoint(EXAMPLE.key);
    idB = await createEndpoint(SECOND.key);
    idGone = await createEndpoint(EXAMPLE.key);
    expect((await t.app.inject({ method: 'DELETE', url: `${BASE}${idGone}/`, headers: { 'x-api-key': EXAMPLE.key } })).statusCode).toBe(204);
    const test = async (id: string, key: string) => {
      const res = await t.app.inject({ method: 'POST', url: `${BASE}${id}/test/`, headers: { 'x-api-key': key } });
      expect(res.statusCode).toBe(202);
      return res.json().delivery_id as string;
    };
    for (let i = 0; i < 8; i++) endpointsA.push(await createEndpoint(EXAMPLE.key));
    deliveryA = await test(idA, EXAMPLE.key);
    for (let i = 0; i < 8; i++) deliveriesA.push(await test(idA, EXAMPLE.key));
    deliveryB = await test(idB, SECOND.key);
    // enough of A's bulks that the cancel's valid requests mostly reach a stored answer (an unknown id is a 404, not kept)
    for (let i = 0; i < A_BULKS; i++) {
      const bulk = await t.app.inject({ method: 'POST', url: '/api/v1/platform-templates/send-bulk/', headers: json(EXAMPLE.key), payload: JSON.stringify(BULK_BODY) });
      expect(bulk.statusCode).toBe(202);
      bulksA.push(bulk.json().bulk_send_id);
    }
    const bulk = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send-bulk/', headers: json(SECOND.key),
      payload: JSON.stringify({ phone_number_id: B_NUMBER, template_name: 'stock_alert', language: 'es', recipients: [{ phone: '+5491155550009', variables: { product: 'x' } }] }),
    });
    expect(bulk.statusCode).toBe(202);
    bulkB = bulk.json().bulk_send_id;
  });
  afterAll(async () => {
    await t?.close();
  });

  // ======================================================================================================
  describe('webhook-endpoint API (error family plain {error})', () => {
    it('familyOf maps every webhook-endpoint path to the plain family', () => {
      for (const p of [BASE, `${BASE}x/`, `${BASE}x/rotate-secret/`, `${BASE}x/deliveries/?page=2`, `${BASE}x/deliveries/y/retry/`, `${BASE}x/recover/`, `${BASE}x/test/`]) {
        expect(familyOf(p)).toBe('plain');
      }
    });

    it('POST: URLs under the default rules: https to a public unicast address is 201, anything the docs refuse is 400 (also via PATCH)', async () => {
      await fc.assert(fc.asyncProperty(labelledUrl, fc.subarray(CATALOGUE, { minLength: 1 }), fc.boolean(), async ({ url, verdict }, types, viaPatch) => {
        const res = viaPatch
          ? await inject({ method: 'PATCH', url: `${BASE}${idA}/`, headers: json(EXAMPLE.key), payload: JSON.stringify({ url }) })
          : await inject({ method: 'POST', url: BASE, headers: json(EXAMPLE.key), payload: JSON.stringify({ url, event_types: types }) });
        if (verdict === 'ok') {
          expect(res.statusCode).toBe(viaPatch ? 200 : 201);
          expect(res.json().url).toBe(url.trim());
        } else if (verdict === 'refused') {
          expect(res.statusCode).toBe(400);
        } else {
          expect([200, 201, 400]).toContain(res.statusCode);
        }
      }), params);
    });

    it('POST: structured bodies (adversarial url, event types wrong/duplicated/huge, description types) give 201 or 400 as documented', async () => {
      await fc.assert(fc.asyncProperty(createBody, fc.constantFrom(EXAMPLE.key, SECOND.key), async ({ raw, body, verdict }, key) => {
        const res = await inject({ method: 'POST', url: BASE, headers: json(key), payload: raw });
        if (verdict === 'ok') expect(res.statusCode).toBe(201);
        if (verdict === 'refused') expect(res.statusCode).toBe(400);
        if (res.statusCode === 201) {
          const e = res.json();
          expect(e).toEqual({
            id: expect.stringMatching(/^[0-9a-f-]{36}$/), url: (body.url as string).trim(), event_types: [...new Set(body.event_types as string[])],
            description: body.description ?? null, enabled: true, disabled_reason: null, created_at: expect.any(String), updated_at: expect.any(String),
            secret: expect.stringMatching(/^whsec_/),
          });
          expect(await otherCompanysEndpoints(COMPANY_OF[key])).not.toContain(e.id);
        }
      }), params);
    });

    it('POST: mutated and malformed raw bodies, content types, API keys and junk query strings', async () => {
      await fc.assert(fc.asyncProperty(mutatedBody(WEBHOOK_BODY), contentType, apiKey, queryString(['x']), async (payload, ct, key, qs) => {
        const headers = keyHeader(key);
        if (ct !== undefined) headers['content-type'] = ct;
        const res = await inject({ method: 'POST', url: withQuery(BASE, qs), headers, payload });
        if (res.statusCode < 300) expect(key !== undefined && key in COMPANY_OF).toBe(true);
      }), params);
    });

    it('GET list: adversarial query strings and keys; a company key sees only its own endpoints', async () => {
      await fc.assert(fc.asyncProperty(queryString(['page', 'page_size', 'company_id']), apiKey, async (qs, key) => {
        const res = await inject({ method: 'GET', url: withQuery(BASE, qs), headers: keyHeader(key) });
        if (res.statusCode < 300) {
          expect(key !== undefined && key in COMPANY_OF).toBe(true);
          const others = await otherCompanysEndpoints(COMPANY_OF[key!]);
          for (const e of res.json().results) expect(others.has(e.id)).toBe(false);
          expect(res.body).not.toContain('whsec_');
        }
      }), params);
    });

    // ids: A's endpoint (DELETE gets a disposable one of A), B's endpoint, a deleted one, A's id upper-cased or
    // percent-encoded character by character, random UUIDs, junk and broken percent-encoding
    const endpointId = fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom('__A__', '__A__', '__A__', '__B__', '__GONE__', '__A_UPPER__', '__A_PCT__') },
      { weight: 1, arbitrary: fc.uuid() },
      { weight: 2, arbitrary: nastyString.map((s) => enc(s.slice(0, 600))) },
      { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '..', '.', '%2F', 'a%00b', '%E0%A4%A', '%ED%A0%80', 'x'.repeat(600), '00000000-0000-0000-0000-000000000000', '__A__%20', '__A__x') },
    );
    const deliveryId = fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('__DA__', '__DA__', '__DB__') },
      { weight: 1, arbitrary: fc.uuid() },
      { weight: 1, arbitrary: nastyString.map((s) => enc(s.slice(0, 600))) },
      { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '..', '%2F', '1', '-1', 'x'.repeat(600)) },
    );
    // paging: random and adversarial, plus the extremes (page × page_size past 2^53 or int8, huge sizes, hex, exponents)
    const pagingQuery = fc.oneof(
      { weight: 3, arbitrary: queryString(['page', 'page_size', 'before', 'after']) },
      { weight: 1, arbitrary: fc.tuple(
        fc.constantFrom('1', '2', '0', '-1', '9007199254740991', '9007199254740992', '92233720368547758', '2147483648', '1e3', '1e21', '0x10', '0b1', '1.0', '1.5', ' 1', '1%00', '', 'NaN', 'Infinity'),
        fc.constantFrom('1', '20', '100', '101', '100000', '0', '-5', '9007199254740991', '1e2', '1e309', '0x64', ''),
        fc.option(fc.constantFrom('1', '2', '0', '-1', '9007199254740991', '9007199254740992', '9223372036854775807', '1e3', '0x10', '1.0', ' 1', '01', '%00', '', 'NaN'), { freq: 2 }),
        fc.constantFrom('before', 'after'),
      ).map(([page, size, id, name]) => `page=${page}&page_size=${size}${id === null ? '' : `&${name}=${id}`}`) },
    );
    const patchBody = fc.oneof(
      fc.record({ url: fc.constantFrom('https://hooks.example.com/p', 'https://10.0.0.1/', 'http://hooks.example.com/'), event_types: fc.subarray(CATALOGUE, { minLength: 1 }), description: fc.option(fc.string({ maxLength: 20 })), enabled: fc.boolean() }, { requiredKeys: [] })
        .map((b) => JSON.stringify(b)),
      mutatedBody(PATCH_BODY),
    );

    const ID_ROUTES: Array<[string, Method, string]> = [
      ['GET {id}/', 'GET', ''],
      ['PATCH {id}/', 'PATCH', ''],
      ['DELETE {id}/', 'DELETE', ''],
      ['POST {id}/rotate-secret/', 'POST', 'rotate-secret/'],
      ['GET {id}/deliveries/', 'GET', 'deliveries/'],
      ['POST {id}/deliveries/{delivery_id}/retry/', 'POST', 'deliveries/{d}/retry/'],
      ['POST {id}/test/', 'POST', 'test/'],
    ];

    describe.each(ID_ROUTES)('%s', (_name, method, sub) => {
      it('adversarial ids, delivery ids, paging queries, bodies, content types and keys: 2xx only for the owner', async () => {
        const keys = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(EXAMPLE.key, EXAMPLE.key, SECOND.key) }, { weight: 1, arbitrary: apiKey });
        const query = fc.oneof({ weight: 1, arbitrary: fc.constant('') }, { weight: 2, arbitrary: pagingQuery });
        const bodyTypes = fc.oneof({ weight: 3, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: contentType });
        const strayCt = fc.option(contentType, { freq: 5 });
        await fc.assert(fc.asyncProperty(endpointId, deliveryId, query, patchBody, fc.option(jsonValueText, { freq: 4 }), bodyTypes, strayCt, keys,
          async (rawId, rawDelivery, qs, patch, junkBody, bodyCt, stray, key) => {
            let id = rawId;
            let owner: number | undefined;
            const a = async () => (method === 'DELETE' ? (victim ??= await createEndpoint(EXAMPLE.key)) : idA);
            if (rawId === '__A__') [id, owner] = [await a(), EXAMPLE.companyId];
            else if (rawId === '__A_PCT__') [id, owner] = [[...(await a())].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join(''), EXAMPLE.companyId];
            else if (rawId === '__A_UPPER__') id = (await a()).toUpperCase();
            else if (rawId === '__B__') [id, owner] = [idB, SECOND.companyId];
            else if (rawId === '__GONE__') id = idGone;
            else id = rawId.replace('__A__', idA);
            const delivery = rawDelivery === '__DA__' ? deliveryA : rawDelivery === '__DB__' ? deliveryB : rawDelivery;
            const path = `${BASE}${id}/${sub.replace('{d}', delivery)}`;
            const headers = keyHeader(key);
            let payload: string | undefined;
            if (method === 'PATCH') payload = patch;
            else if (method === 'POST') payload = junkBody ?? undefined;
            const ct = payload !== undefined ? bodyCt : stray ?? undefined;
            if (ct !== undefined) headers['content-type'] = ct;
            const url = sub === 'deliveries/' || method === 'GET' ? withQuery(path, qs) : path;
            const res = await inject({ method, url, headers, payload });
            // an id of dot segments ('.', '..') is resolved away by URL parsing and names another route (the list): no owner check
            const sameRoute = new URL(path, 'http://localhost').pathname === path;
            if (res.statusCode < 300 && sameRoute) {
              // only the owning company's key reaches an endpoint (and its own delivery)
              expect(key !== undefined && key in COMPANY_OF).toBe(true);
              expect(owner).toBe(COMPANY_OF[key!]);
              if (sub.startsWith('deliveries/{d}')) expect(delivery).toBe(owner === EXAMPLE.companyId ? deliveryA : deliveryB);
              if (method === 'DELETE') victim = undefined;
            }
          }), params);
      });
    });

    it("B's endpoint and B's delivery through A's key: 404 {error} on every route, B's endpoint and deliveries unchanged", async () => {
      const before = { endpoint: (await t.app.inject({ method: 'GET', url: `${BASE}${idB}/`, headers: { 'x-api-key': SECOND.key } })).body, deliveries: await deliveriesOf(idB) };
      const requests: InjectOptions[] = [
        { method: 'GET', url: `${BASE}${idB}/` },
        { method: 'PATCH', url: `${BASE}${idB}/`, payload: JSON.stringify({ enabled: false, description: 'taken over', url: 'https://attacker.example/' }) },
        { method: 'DELETE', url: `${BASE}${idB}/` },
        { method: 'POST', url: `${BASE}${idB}/rotate-secret/` },
        { method: 'GET', url: `${BASE}${idB}/deliveries/` },
        { method: 'GET', url: `${BASE}${idB}/deliveries/?page=1&page_size=100` },
        { method: 'POST', url: `${BASE}${idB}/deliveries/${deliveryB}/retry/` },
        { method: 'POST', url: `${BASE}${idA}/deliveries/${deliveryB}/retry/` },
        { method: 'POST', url: `${BASE}${idB}/deliveries/${deliveryA}/retry/` },
        { method: 'POST', url: `${BASE}${idB}/test/` },
      ];
      for (const r of requests) {
        const res = await inject({ ...r, headers: r.payload === undefined ? { 'x-api-key': EXAMPLE.key } : json(EXAMPLE.key) });
        expect([r.url, res.statusCode]).toEqual([r.url, 404]);
        expect(res.json()).toEqual({ error: expect.any(String) });
      }
      expect((await t.app.inject({ method: 'GET', url: `${BASE}${idB}/`, headers: { 'x-api-key': SECOND.key } })).body).toBe(before.endpoint);
      expect(await deliveriesOf(idB)).toEqual(before.deliveries);
    });
  });

  // ======================================================================================================
  describe('Idempotency-Key on the keyed POSTs', () => {
    interface KeyedRoute {
      name: string;
      /** a valid request of company A (or B); distinct n give requests that differ after validation */
      valid(n: number, companyId: number): Req;
      /** the same request written differently: equal after validation (docs: canonical JSON, deduplicated/trimmed fields) */
      equivalent(r: Req): Req;
      /** requests refused for their body or path alone: docs say they are refused before the key is recorded */
      bodyRefusals: Req[];
      junk: fc.Arbitrary<Req>;
      /** its answer does not name the request (a count): B's fresh answer may equal A's */
      anonymousAnswer?: true;
    }
    const body = (url: string, b: unknown): Req => ({ url, raw: JSON.stringify(b) });
    const reorder = (r: Req): Req => (r.raw === undefined ? r : { ...r, raw: JSON.stringify(reversed(JSON.parse(r.raw))) });
    const SEND = '/api/v1/platform-templates/send/';
    const BULK = '/api/v1/platform-templates/send-bulk/';
    const UPSERT = '/api/v1/external/contacts/upsert/';
    const UNKNOWN_ENDPOINT = '00000000-0000-4000-8000-000000000000';

    const ROUTES: KeyedRoute[] = [
      {
        name: `POST ${SEND}`,
        valid: (n, c) => body(SEND, c === EXAMPLE.companyId ? { ...SEND_BODY, recipient_phone: phoneOf(n) }
          : { phone_number_id: B_NUMBER, template_name: 'stock_alert', language: 'es', recipient_phone: phoneOf(n), variables: { product: `p${n}` } }),
        equivalent: reorder,
        bodyRefusals: [body(SEND, { ...SEND_BODY, recipient_phone: 'abc' }), { url: SEND, raw: '{' }, body(SEND, { ...SEND_BODY, phone_number_id: 42 })],
        junk: fc.oneof(mutatedBody(SEND_BODY), jsonValueText).map((raw) => ({ url: SEND, raw })),
      },
      {
        name: `POST ${BULK}`,
        valid: (n, c) => body(BULK, c === EXAMPLE.companyId ? { ...BULK_BODY, recipients: [{ ...BULK_BODY.recipients[0], phone: phoneOf(n) }] }
          : { phone_number_id: B_NUMBER, template_name: 'stock_alert', language: 'es', recipients: [{ phone: phoneOf(n), variables: { product: `p${n}` } }] }),
        equivalent: reorder,
        bodyRefusals: [body(BULK, { ...BULK_BODY, recipients: [{ ...BULK_BODY.recipients[0], phone: 'abc' }] }), { url: BULK, raw: '{' }, body(BULK, { ...BULK_BODY, recipients: [] })],
        junk: fc.oneof(mutatedBody(BULK_BODY), jsonValueText).map((raw) => ({ url: BULK, raw })),
      },
      {
        name: `POST ${UPSERT}`,
        valid: (n, c) => body(UPSERT, c === EXAMPLE.companyId ? { ...UPSERT_BODY, phone: phoneOf(n), full_name: `Fuzz ${n}` } : { phone: phoneOf(n), full_name: `Fuzz ${n}` }),
        equivalent: reorder,
        bodyRefusals: [body(UPSERT, { ...UPSERT_BODY, phone: 'garbage' }), { url: UPSERT, raw: '{' }, body(UPSERT, { ...UPSERT_BODY, full_name: 42 })],
        junk: fc.oneof(mutatedBody(UPSERT_BODY), jsonValueText).map((raw) => ({ url: UPSERT, raw })),
      },
      {
        name: 'POST /api/v1/platform-templates/bulk-sends/{id}/cancel/',
        // n picks one of A's bulks (cancelled once, then 409), B's bulk (404 for A) or an unknown id (404)
        valid: (n) => ({ url: CANCEL(n < bulksA.length ? bulksA[n] : n === bulksA.length ? bulkB : `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`) }),
        equivalent: (r) => r,
        bodyRefusals: [{ url: CANCEL('not-a-uuid') }, { url: CANCEL('%zz') }],
        junk: fc.record({
          id: fc.oneof(fc.constantFrom(...[0, 1, 2].map(String)), nastyString.map((s) => enc(s.slice(0, 300)))),
          raw: fc.option(fc.oneof(fc.constantFrom('', '{}', '{', 'null'), jsonValueText), { nil: undefined }),
        }).map(({ id, raw }) => ({ url: CANCEL(/^[0-2]$/.test(id) ? bulksA[Number(id)] : id), raw })),
      },
      {
        name: `POST ${BASE}`,
        valid: (n) => body(BASE, { url: `https://hooks.example.com/fuzz/${n}`, event_types: ['message.sent', 'contact.upserted'], description: `fuzz ${n}` }),
        equivalent: (r) => {
          const b = JSON.parse(r.raw!);
          return body(BASE, reversed({ ...b, url: ` ${b.url}\n`, event_types: [...b.event_types, b.event_types[0]] }));
        },
        bodyRefusals: [
          body(BASE, { url: 'http://hooks.example.com/in', event_types: ['message.sent'] }),
          body(BASE, { url: 'https://10.0.0.1/in', event_types: ['message.sent'] }),
          body(BASE, { url: 'https://hooks.example.com/in', event_types: 'message.sent' }),
          { url: BASE, raw: '{' },
        ],
        junk: fc.oneof(mutatedBody(WEBHOOK_BODY), createBody.map((b) => b.raw), jsonValueText).map((raw) => ({ url: BASE, raw })),
      },
      {
        name: 'POST /api/v1/webhook-endpoints/{id}/recover/',
        // distinct n: distinct ranges; every one answers 202 (kept), whatever it finds
        valid: (n, c) => body(`${BASE}${c === EXAMPLE.companyId ? idA : idB}/recover/`, { since: new Date(Date.UTC(2026, 0, 1) + n * 60_000).toISOString(), until: '2100-01-01T00:00:00.000Z' }),
        equivalent: reorder,
        // (the body is validated before the endpoint is looked up: any id will do, and A's is not known yet here)
        bodyRefusals: [
          body(`${BASE}${UNKNOWN_ENDPOINT}/recover/`, { since: 'yesterday' }),
          body(`${BASE}${UNKNOWN_ENDPOINT}/recover/`, { since: '2026-02-01T00:00:00.000Z', until: '2026-01-01T00:00:00.000Z' }),
          body(`${BASE}${UNKNOWN_ENDPOINT}/recover/`, { since: '2026-01-01T00:00:00.000Z', extra: 1 }),
          { url: `${BASE}${UNKNOWN_ENDPOINT}/recover/`, raw: '{' },
        ],
        junk: fc.oneof(mutatedBody({ since: '2026-01-01T00:00:00.000Z' }), jsonValueText).map((raw) => ({ url: `${BASE}${idA}/recover/`, raw })),
        anonymousAnswer: true,
      },
      ...(['rotate-secret', 'test'] as const).map((action): KeyedRoute => ({
        name: `POST /api/v1/webhook-endpoints/{id}/${action}/`,
        // n picks one of A's endpoints (kept: 200 or 202), or an unknown id (404, not kept); B's own endpoint for B
        valid: (n, c) => ({ url: `${BASE}${c === EXAMPLE.companyId ? (n < endpointsA.length ? endpointsA[n] : `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`) : idB}/${action}/` }),
        equivalent: (r) => r,
        bodyRefusals: [], // no body, and an id that is not an endpoint is a 404
        junk: fc.record({
          id: fc.oneof(fc.constantFrom('0', '1'), nastyString.map((x) => enc(x.slice(0, 300)))),
          raw: fc.option(fc.oneof(fc.constantFrom('', '{}', '{', 'null'), jsonValueText), { nil: undefined }),
        }).map(({ id, raw }) => ({ url: `${BASE}${/^[01]$/.test(id) ? endpointsA[Number(id)] : id}/${action}/`, raw })),
      })),
      {
        name: 'POST /api/v1/webhook-endpoints/{id}/deliveries/{delivery_id}/retry/',
        // n picks one of A's deliveries (queued again: 202, kept) or an unknown one (404, not kept); B's own delivery for B
        valid: (n, c) => ({
          url: c === EXAMPLE.companyId
            ? `${BASE}${idA}/deliveries/${n < deliveriesA.length ? deliveriesA[n] : `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`}/retry/`
            : `${BASE}${idB}/deliveries/${deliveryB}/retry/`,
        }),
        equivalent: (r) => r,
        bodyRefusals: [], // no body, and an id that is not a delivery of the endpoint is a 404
        junk: fc.record({
          endpoint: fc.oneof(fc.constantFrom('A', 'A', 'B'), nastyString.map((x) => enc(x.slice(0, 300)))),
          delivery: fc.oneof(fc.constantFrom('0', '1', 'B'), nastyString.map((x) => enc(x.slice(0, 300)))),
          raw: fc.option(fc.oneof(fc.constantFrom('', '{}', '{', 'null'), jsonValueText), { nil: undefined }),
        }).map(({ endpoint, delivery, raw }) => ({
          url: `${BASE}${endpoint === 'A' ? idA : endpoint === 'B' ? idB : endpoint}/deliveries/${delivery === 'B' ? deliveryB : /^[01]$/.test(delivery) ? deliveriesA[Number(delivery)] : delivery}/retry/`, raw,
        })),
      },
    ];

    /** mostly a company key and JSON, so that most requests get as far as the key's checks */
    const keyOf = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(EXAMPLE.key, EXAMPLE.key, SECOND.key) }, { weight: 1, arbitrary: apiKey });
    const ctOf = fc.oneof({ weight: 3, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: contentType });
    // At most about 200 recipients in all: the example number's tier (TIER_250) admits 250 new recipients a day, so
    // long runs (FUZZ_RUNS=300) keep getting accepted sends instead of running out of quota (429, not kept).
    const nArb = fc.oneof({ weight: 1, arbitrary: fc.integer({ min: 0, max: 3 }) }, { weight: 4, arbitrary: fc.integer({ min: 4, max: 199 }) });
    /** A valid request of A, one written differently, or junk. */
    const requestOf = (route: KeyedRoute) => fc.oneof(
      { weight: 3, arbitrary: fc.tuple(nArb, fc.boolean()).map(([n, eq]) => ({ kind: 'valid' as const, n, eq })) },
      { weight: 2, arbitrary: route.junk.map((req) => ({ kind: 'junk' as const, req })) },
    ).map((c) => (c.kind === 'valid' ? { valid: true, req: c.eq ? route.equivalent(route.valid(c.n, EXAMPLE.companyId)) : route.valid(c.n, EXAMPLE.companyId) } : { valid: false, req: c.req }));

    const send = (req: Req, apiKeyValue: string | undefined, idem?: { name: string; value: string | string[] }, ct: string | undefined = 'application/json') => {
      const headers: Record<string, string | string[]> = keyHeader(apiKeyValue);
      if (req.raw !== undefined && ct !== undefined) headers['content-type'] = ct;
      if (idem) headers[idem.name] = idem.value;
      return inject({ method: 'POST', url: req.url, headers, payload: req.raw });
    };
    const replayed = (res: Checked) => res.headers['idempotent-replayed'];
    const expectReused422 = (res: Checked) => {
      expect(res.statusCode).toBe(422);
      expect(res.json()).toEqual({ error: KEY_REUSED_ERROR });
    };

    describe.each(ROUTES.map((r) => [r.name, r] as const))('%s', (_name, route) => {
      it('(a)(d) valid, malformed and repeated header values with valid and mutated requests: a malformed key is 400 and records nothing', async () => {
        await fc.assert(fc.asyncProperty(keySpec, headerName, requestOf(route), keyOf, ctOf, async (spec, name, { valid, req }, key, ct) => {
          const value = resolveKey(spec);
          const malformed = isMalformed(value);
          const keysBefore = await keyCount();
          const res = await send(req, key, { name, value }, ct);
          if (malformed) {
            expect(res.statusCode).toBeGreaterThanOrEqual(400);
            expect(await keyCount()).toBe(keysBefore);
            // a valid request of a company key, sent as JSON (send() sets no content type on a bodyless request)
            const wellFormed = valid && key !== undefined && key in COMPANY_OF && (req.raw === undefined || (ct !== undefined && JSON_TYPES.has(ct)));
            if (wellFormed) {
              expect(res.statusCode).toBe(400);
              expect(res.json()).toEqual({ error: formatErrorOf(value) });
            }
          } else if (res.statusCode < 300) {
            // a 2xx under a valid key is stored, so that a retry replays it
            expect(replayed(res)).toBeUndefined();
            expect(await recordOf(COMPANY_OF[key!], value as string, req.url)).toEqual({ state: 'completed', status_code: res.statusCode });
          }
        }), params);
      });

      it('(d) a malformed key on a valid request of a company key: exactly 400 {error} naming the format, nothing recorded, no event', async () => {
        await fc.assert(fc.asyncProperty(malformedSpec, headerName, nArb, fc.constantFrom(EXAMPLE.key, SECOND.key), async (spec, name, n, key) => {
          const keysBefore = await keyCount();
          const res = await send(route.valid(n, COMPANY_OF[key]), key, { name, value: resolveKey(spec) });
          expect(res.statusCode).toBe(400);
          expect(res.json()).toEqual({ error: KEY_FORMAT_ERROR });
          expect(await keyCount()).toBe(keysBefore);
        }), params);
      });

      it('(b) the identical request again answers the same status, body and content type; a 2xx comes back replayed and appends nothing', async () => {
        await fc.assert(fc.asyncProperty(validSpec, headerName, requestOf(route), keyOf, ctOf, async (spec, name, { req }, key, ct) => {
          const idem = { name, value: resolveKey(spec) };
          const first = await send(req, key, idem, ct);
          const events = await countEvents(t.db.pool);
          const second = await send(req, key, idem, ct);
          expect(second.statusCode).toBe(first.statusCode);
          expect(second.body).toBe(first.body);
          expect(second.headers['content-type']).toBe(first.headers['content-type']);
          if (first.statusCode < 300) {
            expect(replayed(first)).toBeUndefined();
            expect(replayed(second)).toBe('true');
            expect(await countEvents(t.db.pool)).toBe(events);
          }
        }), params);
      });

      it('(c) after a stored answer, the key with another valid request (or on another route sharing its keys) is 422 {error}; the original request still replays', async () => {
        const url = route.valid(0, EXAMPLE.companyId).url;
        const others = ROUTES.filter((r) => r !== route && sharesKeysWith(url, r.valid(0, EXAMPLE.companyId).url)).map((r) => r.name);
        await fc.assert(fc.asyncProperty(validSpec, nArb, nArb, fc.constantFrom(undefined, ...others), nArb, async (spec, n1, n2raw, otherName, n3) => {
          const n2 = n2raw === n1 ? n1 + 1 : n2raw;
          const other = ROUTES.find((r) => r.name === otherName);
          const idem = { name: 'idempotency-key', value: resolveKey(spec) };
          const first = await send(route.valid(n1, EXAMPLE.companyId), EXAMPLE.key, idem);
          if (!kept(first.statusCode)) {
            // not kept (a cancel of an unknown bulk: 404; a 429 should the number's quota run out): not stored,
            // so the same request under the key runs again instead of replaying
            expect(await recordOf(EXAMPLE.companyId, idem.value as string, url)).toBeUndefined();
            expect(replayed(await send(route.valid(n1, EXAMPLE.companyId), EXAMPLE.key, idem))).toBeUndefined();
            return;
          }
          // the request passed authentication and validation: its answer is stored (else the property would be vacuous)
          expect(await recordOf(EXAMPLE.companyId, idem.value as string, url)).toEqual({ state: 'completed', status_code: first.statusCode });
          const events = await countEvents(t.db.pool);
          expectReused422(await send(route.valid(n2, EXAMPLE.companyId), EXAMPLE.key, idem));
          if (other) expectReused422(await send(other.valid(n3, EXAMPLE.companyId), EXAMPLE.key, idem));
          const again = await send(route.equivalent(route.valid(n1, EXAMPLE.companyId)), EXAMPLE.key, idem);
          expect([again.statusCode, again.body, replayed(again)]).toEqual([first.statusCode, first.body, 'true']);
          expect(await countEvents(t.db.pool)).toBe(events);
        }), params);
      });

      it('(c) keys are scoped per company: B may use A\'s key for its own request (a fresh answer, not a replay or 422), and A still replays', async () => {
        await fc.assert(fc.asyncProperty(validSpec, nArb, async (spec, n) => {
          const idem = { name: 'idempotency-key', value: resolveKey(spec) };
          const a = await send(route.valid(n, EXAMPLE.companyId), EXAMPLE.key, idem);
          const b = await send(route.valid(n, SECOND.companyId), SECOND.key, idem);
          if (b.statusCode === 422) expect(b.json()).not.toEqual({ error: KEY_REUSED_ERROR }); // a provider refusal is a 422 too
          expect(replayed(b)).toBeUndefined();
          if (a.statusCode < 300 && b.statusCode < 300 && !route.anonymousAnswer) expect(b.body).not.toBe(a.body);
          const again = await send(route.valid(n, EXAMPLE.companyId), EXAMPLE.key, idem);
          expect([again.statusCode, again.body, replayed(again)]).toEqual([a.statusCode, a.body, kept(a.statusCode) ? 'true' : undefined]);
        }), { ...params, numRuns: Math.max(1, Math.ceil(RUNS / 4)) });
      });

      // (rotate-secret and test have no body to refuse, and an id that is not an endpoint is a 404: not their property)
      if (route.bodyRefusals.length > 0) it('a 400 is never recorded (docs/idempotency.md "Order of checks"): the corrected request may reuse the key', async () => {
        await fc.assert(fc.asyncProperty(validSpec, fc.constantFrom(...route.bodyRefusals), nArb, async (spec, refused, n) => {
          const idem = { name: 'idempotency-key', value: resolveKey(spec) };
          const res = await send(refused, EXAMPLE.key, idem);
          expect(res.statusCode).toBe(400);
          expect(await recordOf(EXAMPLE.companyId, idem.value as string, refused.url)).toBeUndefined();
          const corrected = await send(route.valid(n, EXAMPLE.companyId), EXAMPLE.key, idem);
          if (corrected.statusCode === 422) expect(corrected.json()).not.toEqual({ error: KEY_REUSED_ERROR }); // a provider refusal is a 422 too
          expect(replayed(corrected)).toBeUndefined();
        }), { ...params, numRuns: Math.max(1, Math.ceil(RUNS / 4)) });
      });
    });
  });

  it("the suite's own state stays bounded: at most about four webhook endpoints per run of a property", async () => {
    const { rows: [{ n }] } = await t.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM rm_webhooks.endpoints');
    expect(n).toBeLessThanOrEqual(4 * RUNS + 20);
  });
});
