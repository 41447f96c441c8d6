import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { EXAMPLE, exampleFixture } from '../support/provisioning';
import { SHOP, sendsFixture } from '../support/sends';
import { createTestApp } from '../support/services';

// Review 16e: clients build on Switchboard by generating an SDK from GET /openapi.json. This suite does what such a
// client does, with a maintained generator and client: openapi-typescript turns the served document into TypeScript
// types, a small program written against those types with openapi-fetch is type-checked with the project's
// TypeScript (--strict), and then it calls the real server over HTTP. A field the document types wrongly, a required
// field marked optional or a missing response is a compile error here; a body the types promise but the server does
// not send is a failed assertion. The generator and the client are ESM: they run in child Node processes (jest runs
// the tests as CommonJS), and the program is an ES module of its own.

const ROOT = join(__dirname, '../..');
const run = promisify(execFile);

/** openapi-typescript's Node API: the document (a file) in, the types (TypeScript source) out. */
const GENERATE = `
import openapiTS, { astToString } from 'openapi-typescript';
import { readFileSync, writeFileSync } from 'node:fs';
const ast = await openapiTS(JSON.parse(readFileSync(process.argv[1], 'utf8')));
writeFileSync(process.argv[2], astToString(ast));
`;

/** The maintained validator of openapi-valid.test.ts (ESM, so in a child process too). */
const VALIDATE = `
import { Validator } from '@seriousme/openapi-schema-validator';
import { readFileSync } from 'node:fs';
const result = await new Validator().validate(JSON.parse(readFileSync(process.argv[1], 'utf8')));
process.stdout.write(JSON.stringify(result));
`;

/**
 * The client program. Its annotations say what a client relies on (a status is 'sent', companySize is an enum or
 * null, a bulk send's id is a string); the @ts-expect-error says recipient_phone is required by the document.
 * It prints what it received as JSON.
 */
const PROGRAM = `
import createClient from 'openapi-fetch';
import type { paths } from './api.js';

const [base, exampleKey, shopKey, shopNumber, hookUrl] = process.argv.slice(2) as [string, string, string, string, string];
const example = createClient<paths>({ baseUrl: base, headers: { 'X-API-Key': exampleKey } });
const shop = createClient<paths>({ baseUrl: base, headers: { 'X-API-Key': shopKey } });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const replayed = (response: Response): string | null => response.headers.get('idempotent-replayed');
function fail(what: string, answer: { response: Response; error?: unknown }): never {
  throw new Error(what + ': ' + answer.response.status + ' ' + JSON.stringify(answer.error));
}
/** reads until the answer has data (a read model may trail the write it follows), for at most 20 s */
async function until<T extends { data?: unknown; response: Response }>(read: () => Promise<T>, ready: (answer: T) => boolean): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const answer = await read();
    if (ready(answer) || Date.now() > deadline) return answer;
    await sleep(50);
  }
}
const out: Record<string, unknown> = {};

// a read
const info = await example.GET('/api/v1/business-info/');
if (!info.data) fail('business-info', info);
const size: 'MICRO' | 'SMALL' | 'MEDIUM' | 'LARGE' | 'ENTERPRISE' | null = info.data.companySize;
const types: Array<'ECOMMERCE' | 'CLINIC'> = info.data.companyTypes;
const companyId: number = info.data.id;
out.businessInfo = { status: info.response.status, body: info.data, size, types, companyId };

// the single send: without a key, then with one twice (the second is the replay)
type SendBody = paths['/api/v1/platform-templates/send/']['post']['requestBody']['content']['application/json'];
const sendBody: SendBody = { phone_number_id: shopNumber, template_name: 'welcome', recipient_phone: '+5491155550401' };
const plain = await shop.POST('/api/v1/platform-templates/send/', { body: sendBody });
if (!plain.data) fail('send', plain);
const sentStatus: 'sent' = plain.data.status;
const messageId: string = plain.data.message_id;
const keyedBody: SendBody = { ...sendBody, recipient_phone: '+5491155550402' };
const keyedHeaders = { 'idempotency-key': 'review16e-send' };
const keyed = await shop.POST('/api/v1/platform-templates/send/', { body: keyedBody, params: { header: keyedHeaders } });
if (!keyed.data) fail('keyed send', keyed);
const replay = await shop.POST('/api/v1/platform-templates/send/', { body: keyedBody, params: { header: keyedHeaders } });
if (!replay.data) fail('replayed send', replay);
out.sends = {
  plain: { status: plain.response.status, body: plain.data, replayed: replayed(plain.response), sentStatus, messageId },
  keyed: { status: keyed.response.status, body: keyed.data, replayed: replayed(keyed.response) },
  replay: { status: replay.response.status, body: replay.data, replayed: replayed(replay.response) },
};

// a send with a missing field: the typed error branch
const missing = await shop.POST('/api/v1/platform-templates/send/', {
  // @ts-expect-error the document makes recipient_phone required
  body: { phone_number_id: shopNumber, template_name: 'welcome' },
});
if (missing.data !== undefined || missing.error === undefined) throw new Error('the send without recipient_phone succeeded');
const refusal = missing.error;
const fieldErrors: string[] | undefined = 'error' in refusal ? undefined : refusal['recipient_phone'];
out.missingField = { status: missing.response.status, body: refusal, fieldErrors };

// a contact upsert
const upsert = await example.POST('/api/v1/external/contacts/upsert/', {
  body: { phone: '+5491155550499', full_name: 'Generated Client', custom_fields: [{ key: 'plan', value: ['gold'] }] },
});
if (!upsert.data) fail('upsert', upsert);
const created: boolean = upsert.data.created;
const contactId: number = upsert.data.contact.id;
const plan = upsert.data.contact.customFields.find((f) => f.key === 'plan');
const planValue: Array<string | number> | null | undefined = plan?.value;
out.upsert = { status: upsert.response.status, body: upsert.data, created, contactId, planValue };

// a bulk creation and its detail
const bulk = await shop.POST('/api/v1/platform-templates/send-bulk/', {
  body: { phone_number_id: shopNumber, template_name: 'welcome', recipients: [{ phone: '+5491155550501' }, { phone: '+5491155550502' }] },
});
if (!bulk.data) fail('send-bulk', bulk);
const bulkId: string = bulk.data.bulk_send_id;
/** never called: the document types each recipient (a phone required), so a misspelt one does not compile */
function misspeltRecipient() {
  return shop.POST('/api/v1/platform-templates/send-bulk/', {
    body: {
      phone_number_id: shopNumber, template_name: 'welcome',
      // @ts-expect-error each recipient has a phone
      recipients: [{ phones: '+5491155550501' }],
    },
  });
}
void misspeltRecipient;
/** never called: the list filters are the document's enums (review 16e), so a status in the wrong case does not compile */
function wrongCaseFilter() {
  // @ts-expect-error the bulk statuses are upper case
  return shop.GET('/api/v1/platform-templates/bulk-sends/', { params: { query: { status: 'queued' } } });
}
void wrongCaseFilter;
const queued: 'queued' = bulk.data.status;
const detail = await until(() => shop.GET('/api/v1/platform-templates/bulk-sends/{bulk_send_id}/', { params: { path: { bulk_send_id: bulkId } } }), (a) => a.data !== undefined);
if (!detail.data) fail('bulk detail', detail);
const bulkStatus: 'QUEUED' | 'PROCESSING' | 'COMPLETED' | 'PARTIAL' | 'FAILED' | 'CANCELLED' = detail.data.status;
const startedAt: string | null = detail.data.started_at;
const queuedOnes = await shop.GET('/api/v1/platform-templates/bulk-sends/', { params: { query: { status: 'QUEUED', page_size: 100 } } });
if (!queuedOnes.data) fail('bulk list', queuedOnes);
const sentOnes = await shop.GET('/api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/', { params: { path: { bulk_send_id: bulkId }, query: { status: 'sent' } } });
if (!sentOnes.data) fail('bulk messages', sentOnes);
out.bulkLists = {
  queued: { status: queuedOnes.response.status, statuses: [...new Set(queuedOnes.data.results.map((b) => b.status))] },
  sent: { status: sentOnes.response.status, statuses: [...new Set(sentOnes.data.results.map((m) => m.status))] },
};
out.bulk = { created: { status: bulk.response.status, body: bulk.data, queued }, detail: { status: detail.response.status, body: detail.data, bulkStatus, startedAt } };

// a webhook endpoint: created, listed, deleted
const endpoint = await shop.POST('/api/v1/webhook-endpoints/', { body: { url: hookUrl, event_types: ['message.sent', 'message.failed'], description: 'generated client' } });
if (!endpoint.data) fail('create endpoint', endpoint);
const endpointId: string = endpoint.data.id;
const secret: string = endpoint.data.secret;
const listed = await until(() => shop.GET('/api/v1/webhook-endpoints/'), (a) => a.data?.results.some((e) => e.id === endpointId) === true);
if (!listed.data) fail('list endpoints', listed);
const removed = await shop.DELETE('/api/v1/webhook-endpoints/{id}/', { params: { path: { id: endpointId } } });
if (removed.error !== undefined || !removed.response.ok) fail('delete endpoint', removed);
const deleted: undefined = removed.data; // a 204 has no body: openapi-fetch gives undefined
const gone = await shop.GET('/api/v1/webhook-endpoints/{id}/', { params: { path: { id: endpointId } } });
const goneError: { error: string } | undefined = gone.error;
out.webhooks = {
  created: { status: endpoint.response.status, body: endpoint.data, secretLength: secret.length },
  listed: { status: listed.response.status, body: listed.data },
  deleted: { status: removed.response.status, data: deleted === undefined ? 'undefined' : deleted },
  afterDelete: { status: gone.response.status, body: goneError },
};

process.stdout.write(JSON.stringify(out));
`;

interface Compiled {
  status: number | null;
  output: string;
}

describe('review 16e: a client generated from /openapi.json (openapi-typescript, openapi-fetch) compiles and works against the real server', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let base: string;
  let dir: string;
  let doc: { paths: Record<string, Record<string, { operationId?: string }>> };
  let types: string;
  let compiled: Compiled;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
    await seedFixture(t.services, exampleFixture({ keepContacts: true }), { actor: 'test' });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const served = await fetch(`${base}/openapi.json`);
    expect(served.status).toBe(200);
    const text = await served.text();
    doc = JSON.parse(text);

    dir = mkdtempSync(join(tmpdir(), 'switchboard-client-'));
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'openapi.json'), text);
    await run(process.execPath, ['--input-type=module', '-e', GENERATE, join(dir, 'openapi.json'), join(dir, 'api.ts')], { cwd: ROOT });
    types = readFileSync(join(dir, 'api.ts'), 'utf8');
    writeFileSync(join(dir, 'client.mts'), PROGRAM);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    compiled = await typeCheck(dir);
  }, 300_000);
  afterAll(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the generator names every operation by its operationId and types every response', () => {
    const operationIds = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(operationIds.filter((id) => !id)).toEqual([]);
    const named = [...types.slice(types.indexOf('export interface operations {')).matchAll(/^ {4}([A-Za-z0-9_]+): \{$/gm)].map((m) => m[1]);
    expect(named.sort()).toEqual([...operationIds].sort());
    // each path's methods refer to the named operation (an operation without an id is inlined in `paths` instead)
    for (const id of operationIds) expect(types).toContain(`operations["${id}"]`);
    // every response has its body typed, but the 204 (no body): no `content` is documented for it (review 16e
    // fix: it was an application/json `null`, so openapi-fetch typed `data` as null where it gives undefined)
    const withoutContent = Object.entries(doc.paths).flatMap(([p, ops]) => Object.entries(ops).flatMap(([m, op]) =>
      Object.entries((op as { responses: Record<string, { content?: unknown }> }).responses).filter(([, r]) => !r.content).map(([s]) => `${m} ${p} ${s}`)));
    expect(withoutContent).toEqual(['delete /api/v1/webhook-endpoints/{id}/ 204']);
    // no request or response field is left untyped as a list of anything (review 16e fix: send-bulk's recipients)
    expect(types.split('\n').filter((line) => line.includes('unknown[]')).map((line) => line.trim())).toEqual([]);
  });

  it('the document, with its review 16e metadata, is still valid OpenAPI 3.0', async () => {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', VALIDATE, join(dir, 'openapi.json')], { cwd: ROOT });
    expect(JSON.parse(stdout)).toEqual({ valid: true });
  });

  it('the client program type-checks with the project\'s TypeScript (--strict, noUncheckedIndexedAccess)', () => {
    expect(compiled).toEqual({ status: 0, output: '' });
  });

  it('the check finds a document that types a field wrongly (business-info id as a string)', async () => {
    const broken = structuredClone(doc) as any;
    broken.paths['/api/v1/business-info/'].get.responses['200'].content['application/json'].schema.properties.id = { type: 'string' };
    const other = mkdtempSync(join(tmpdir(), 'switchboard-client-'));
    try {
      symlinkSync(join(ROOT, 'node_modules'), join(other, 'node_modules'), 'dir');
      writeFileSync(join(other, 'openapi.json'), JSON.stringify(broken));
      await run(process.execPath, ['--input-type=module', '-e', GENERATE, join(other, 'openapi.json'), join(other, 'api.ts')], { cwd: ROOT });
      writeFileSync(join(other, 'client.mts'), PROGRAM);
      writeFileSync(join(other, 'package.json'), JSON.stringify({ type: 'module' }));
      const result = await typeCheck(other);
      expect(result.status).not.toBe(0);
      expect(result.output).toMatch(/client\.mts\(\d+,\d+\): error TS2322: Type 'string' is not assignable to type 'number'/);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  }, 300_000); // a type check: minutes on a loaded 2-core machine

  it('through openapi-fetch, the program gets the bodies its types promise from the real server', async () => {
    expect(compiled.status).toBe(0);
    const source = readFileSync(join(dir, 'client.mts'), 'utf8');
    const js = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
    writeFileSync(join(dir, 'client.mjs'), js);
    const { stdout } = await run(process.execPath, [join(dir, 'client.mjs'), base, EXAMPLE.key, SHOP.key, SHOP.number.phoneNumberId, `${base}/nowhere`], { cwd: dir });
    const out = JSON.parse(stdout);

    expect(out.businessInfo).toEqual({
      status: 200,
      body: {
        id: 101, name: 'Clinica Norte', email: 'hola@clinicanorte.example', phone: '+541143210000', website: 'https://clinicanorte.example',
        address: 'Av. Cabildo 1234, CABA', description: 'Outpatient clinic', timezone: 'America/Argentina/Buenos_Aires', companySize: 'SMALL',
        companySizeDisplay: expect.any(String), companyTypes: ['CLINIC'], categories: ['Health', 'Dentistry'],
      },
      size: 'SMALL', types: ['CLINIC'], companyId: 101,
    });

    const sent = (recipient: string) => ({
      success: true, message_id: expect.any(String), template_name: 'welcome', recipient_phone: recipient, status: 'sent', sent_at: expect.any(String),
    });
    expect(out.sends.plain).toEqual({ status: 200, body: sent('+5491155550401'), replayed: null, sentStatus: 'sent', messageId: out.sends.plain.body.message_id });
    expect(out.sends.keyed).toEqual({ status: 200, body: sent('+5491155550402'), replayed: null });
    expect(out.sends.replay).toEqual({ status: 200, body: out.sends.keyed.body, replayed: 'true' });
    expect(out.sends.keyed.body.message_id).not.toBe(out.sends.plain.body.message_id);

    expect(out.missingField).toEqual({ status: 400, body: { recipient_phone: ['This field is required.'] }, fieldErrors: ['This field is required.'] });

    expect(out.upsert).toEqual({
      status: 201,
      body: {
        created: true,
        contact: expect.objectContaining({ id: out.upsert.contactId, fullName: 'Generated Client', phone: '+5491155550499', source: 'api' }),
        versionedCustomFields: [{ customFieldId: 501, key: 'plan', version: 1 }],
      },
      created: true, contactId: expect.any(Number), planValue: ['gold'],
    });

    expect(out.bulk.created).toEqual({
      status: 202,
      body: expect.objectContaining({ bulk_send_id: expect.any(String), status: 'queued', template_name: 'welcome', total_recipients: 2, unique_recipients: 2 }),
      queued: 'queued',
    });
    expect(out.bulk.detail).toEqual({
      status: 200,
      body: expect.objectContaining({ id: out.bulk.created.body.bulk_send_id, total_recipients: 2, template: expect.objectContaining({ template_name: 'welcome' }) }),
      bulkStatus: out.bulk.detail.body.status, startedAt: out.bulk.detail.body.started_at,
    });

    expect(out.bulkLists.queued.status).toBe(200);
    expect(out.bulkLists.queued.statuses.filter((status: string) => status !== 'QUEUED')).toEqual([]);
    expect(out.bulkLists.sent.status).toBe(200);
    expect(out.bulkLists.sent.statuses.filter((status: string) => status !== 'sent')).toEqual([]);

    const endpoint = {
      id: expect.any(String), url: `${base}/nowhere`, event_types: ['message.sent', 'message.failed'], description: 'generated client',
      enabled: true, disabled_reason: null, created_at: expect.any(String), updated_at: expect.any(String),
    };
    expect(out.webhooks.created).toEqual({ status: 201, body: { ...endpoint, secret: expect.any(String) }, secretLength: out.webhooks.created.body.secret.length });
    expect(out.webhooks.listed).toEqual({ status: 200, body: { results: [endpoint] } });
    expect(out.webhooks.listed.body.results[0].id).toBe(out.webhooks.created.body.id);
    expect(out.webhooks.deleted).toEqual({ status: 204, data: 'undefined' });
    expect(out.webhooks.afterDelete).toEqual({ status: 404, body: { error: expect.any(String) } });
  }, 120_000);
});

/** The project's TypeScript on the program and its generated types, as a client's build would run it. */
async function typeCheck(dir: string): Promise<Compiled> {
  const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
  const args = [
    tsc, '--noEmit', '--strict', '--noUncheckedIndexedAccess', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
    '--lib', 'es2022,dom', '--types', 'node', '--pretty', 'false', join(dir, 'client.mts'),
  ];
  try {
    const { stdout, stderr } = await run(process.execPath, args, { cwd: dir });
    return { status: 0, output: `${stdout}${stderr}`.trim() };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { status: e.code ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}`.trim() };
  }
}
