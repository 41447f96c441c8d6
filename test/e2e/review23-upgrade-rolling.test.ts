import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { SERVE_LISTENING_LINE } from '../support/cli-process';
import { BUILT_CLI, describeWithBuiltCli, e2eServerEnv } from '../support/e2e-server';
import { buildOldRelease, oldReleaseUnavailable } from '../support/review23-old-release';

// Review 23: a rolling upgrade from the last release (dfef5d9) to the current code, as an operator does it
// (docs/upgrades.md, "Rolling upgrade"): an old `serve` runs with traffic while the first new `serve` starts beside it
// on the same database (it applies migration 0019: the partial index on webhooks.deliveries), then the old process
// is replaced by a second new one. An old `worker` runs beside them and is replaced last; an old `serve` restarted
// after 0019 serves; one paged export crosses the versions; `projections rebuild contacts` (docs/contacts.md, "Field
// history") runs beside the old serve. Checked: no 4xx/5xx, no projection rebuilt or failing, no error line, every
// webhook delivery received once, the field history trimmed to 10. Guards of docs/upgrades.md (passed when written).
// The old release is built from git into /tmp (test/support/review23-old-release.ts) unless REVIEW23_OLD_TREE names
// such a built tree; a clone without the commit skips with the reason printed.

const OLD_COMMIT = 'dfef5d9';
const FIXTURE = '/work/shared/contracts/example-fixture.json';
const PHONE_NUMBER_ID = '109876543210001';
const TIMEOUT = 600_000;

interface Proc {
  child: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}

function start(cli: string, args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, [cli, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));
  return { child, out: () => out, exited };
}

async function startServe(cli: string, env: NodeJS.ProcessEnv): Promise<{ proc: Proc; url: string }> {
  const proc = start(cli, ['serve'], { ...env, PORT: '0' });
  for (let i = 0; i < 1200; i++) {
    const m = SERVE_LISTENING_LINE.exec(proc.out());
    if (m) return { proc, url: m[1] };
    if (proc.child.exitCode !== null) throw new Error(`serve exited: ${proc.out()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.child.kill('SIGKILL');
  throw new Error(`serve printed no URL: ${proc.out()}`);
}

const stop = async (p: Proc | undefined, signal: NodeJS.Signals = 'SIGTERM') => {
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill(signal);
  await p.exited;
};


const unavailable = oldReleaseUnavailable(OLD_COMMIT);
if (unavailable) console.warn(`review23 rolling upgrade skipped: ${unavailable}`);
const d = unavailable ? describe.skip : describeWithBuiltCli('review23 rolling upgrade');

d(`rolling upgrade from ${OLD_COMMIT} (old serve beside the new ones)`, () => {
  let db: TestDatabase;
  let old: { dir: string; owned: boolean };
  let oldCli: string;
  const dataDirs: string[] = [];
  const procs: Proc[] = [];
  let receiver: Server;
  let receiverUrl: string;
  const received: string[] = [];
  let apiKey: string;

  const envFor = (extra: NodeJS.ProcessEnv = {}) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'review23-upgrade-data-'));
    dataDirs.push(dataDir);
    return e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'warn' }, {
      WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true', ...extra,
    });
  };
  const runCli = (cli: string, args: string[], env: NodeJS.ProcessEnv) => {
    const r = spawnSync(process.execPath, [cli, ...args], { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${cli} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    return r.stdout;
  };
  const api = async (url: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { 'x-api-key': apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const send = (url: string, phone: string) =>
    api(url, 'POST', '/api/v1/platform-templates/send/', {
      phone_number_id: PHONE_NUMBER_ID, template_name: 'appointment_reminder', recipient_phone: phone,
      variables: { patient_name: 'Ana', appointment_at: '2026-03-02T09:30:00-03:00' },
    });
  const upsertVisits = (url: string, visits: number) =>
    api(url, 'POST', '/api/v1/external/contacts/upsert/', {
      phone: '+5491155550999', full_name: 'Rolling Upgrade', custom_fields: [{ key: 'visits', value: [visits] }],
    });
  const bulk = (url: string, from: number) =>
    api(url, 'POST', '/api/v1/platform-templates/send-bulk/', {
      phone_number_id: PHONE_NUMBER_ID, template_name: 'appointment_reminder',
      recipients: [0, 1, 2].map((i) => ({ phone: `+54911555${String(from + i).padStart(5, '0')}`, variables: { patient_name: 'B', appointment_at: '2026-03-02T09:30:00-03:00' } })),
    });
  /** One round of every kind of traffic against `url`: the statuses seen. */
  const traffic = async (url: string, n: number) => {
    const statuses: Array<[string, number]> = [];
    const s = await send(url, `+54911566${String(n).padStart(5, '0')}`);
    statuses.push(['send', s.status]);
    if (s.status === 200) statuses.push(['status', (await api(url, 'GET', `/api/v1/platform-templates/messages/${s.body.message_id}/`)).status]);
    statuses.push(['upsert', (await upsertVisits(url, n)).status]);
    statuses.push(['contact', (await api(url, 'GET', '/api/v1/external/contacts/?phone=%2B5491155550999')).status]);
    statuses.push(['lookup', (await api(url, 'GET', '/api/v1/contact-lookup/?phone=%2B5491155550999')).status]);
    statuses.push(['bulks', (await api(url, 'GET', '/api/v1/platform-templates/bulk-sends/')).status]);
    statuses.push(['info', (await api(url, 'GET', '/api/v1/business-info/')).status]);
    return statuses;
  };

  beforeAll(async () => {
    old = buildOldRelease(OLD_COMMIT);
    oldCli = join(old.dir, 'dist/cli.js');
    db = await createTestDatabase({ migrate: false });
    receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        received.push(String(req.headers['webhook-id']));
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((ok) => receiver.listen(0, '127.0.0.1', ok));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  }, TIMEOUT);

  afterAll(async () => {
    for (const p of procs) await stop(p, 'SIGKILL');
    await new Promise<void>((ok) => receiver?.close(() => ok()));
    await db?.drop();
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
    if (old?.owned) rmSync(old.dir, { recursive: true, force: true });
  }, TIMEOUT);

  it('old and new serve side by side: no 5xx, no projection stopped or rebuilt, each webhook delivered once', async () => {
    const oldEnv = envFor();
    runCli(oldCli, ['seed', FIXTURE], oldEnv);
    apiKey = runCli(oldCli, ['keys', 'issue', '--company', '101', '--name', 'review23'], oldEnv).trim();
    const a = await startServe(oldCli, oldEnv);
    procs.push(a.proc);
    // an old worker too (dispatcher, webhook sender, sweeps), replaced last
    const oldWorker = start(oldCli, ['worker'], envFor());
    procs.push(oldWorker);
    const endpoint = await api(a.url, 'POST', '/api/v1/webhook-endpoints/', { url: receiverUrl, event_types: ['message.sent', 'contact.upserted', 'bulk_send.started', 'bulk_send.completed'] });
    expect(endpoint.status).toBe(201);
    const seen: Array<[string, string, number]> = [];
    const note = (who: string, st: Array<[string, number]>) => st.forEach(([what, code]) => seen.push([who, what, code]));
    for (let i = 1; i <= 12; i++) note('old', await traffic(a.url, i));
    expect((await bulk(a.url, 100)).status).toBe(202);

    // the first new process starts beside the old one (migration 0019), traffic to the old one meanwhile
    let switching = true;
    const during = (async () => {
      for (let i = 100; switching; i++) note('old-during', await traffic(a.url, i));
    })();
    const b = await startServe(BUILT_CLI, envFor());
    procs.push(b.proc);
    switching = false;
    await during;
    const migrated = await db.pool.query(`SELECT version FROM public.schema_migrations WHERE version = 19`);
    expect(migrated.rowCount).toBe(1);
    const index = await db.pool.query(`SELECT 1 FROM pg_indexes WHERE schemaname = 'webhooks' AND indexname = 'deliveries_set_aside'`);
    expect(index.rowCount).toBe(1);

    // an old process restarted mid-rollout (a crash, a host replaced) starts on the migrated database and serves
    const a2 = await startServe(oldCli, envFor());
    procs.push(a2.proc);
    note('old-restarted', await traffic(a2.url, 150));
    await stop(a2.proc);
    expect(a2.proc.child.exitCode).toBe(0);
    expect(runCli(oldCli, ['projections', 'status'], envFor())).not.toMatch(/failing|stored/);

    // both answer, each after the other's writes (the field history trimmed by the new one, grown by the old one)
    for (let i = 200; i < 214; i++) {
      note('new', await traffic(b.url, i));
      note('old', await traffic(a.url, i + 1000));
    }
    expect((await bulk(b.url, 300)).status).toBe(202);

    // the export during the overlap: one query, two versions; the cursor of one is taken by the other, but the old
    // process still exports a sent template's variables (review 22 removed them from the export)
    const from = new Date(Date.now() - 86_400_000).toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    const exportPage = async (url: string, cursor?: string) => {
      const q = new URLSearchParams({ company_id: '101', from, to, limit: '1' });
      if (cursor) q.set('cursor', cursor);
      const res = await fetch(`${url}/api/v1/qualitative-export/messages?${q}`, { headers: { 'x-api-key': apiKey } });
      const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
      return { status: res.status, lines };
    };
    const first = await exportPage(a.url);
    expect(first.status).toBe(200);
    const next = first.lines.find((l) => l._truncated)?.next_cursor;
    expect(typeof next).toBe('string');
    const second = await exportPage(b.url, next);
    expect({ status: second.status, lines: second.status === 200 ? 'ok' : second.lines }).toEqual({ status: 200, lines: 'ok' });
    const templateText = (l: { content?: { text?: string } }) => l.content?.text ?? '';
    expect(templateText(first.lines[0])).toMatch(/^\[template appointment_reminder \(es\)\] .*patient_name=Ana/);
    expect(templateText(second.lines[0])).toBe('[template appointment_reminder (es)]');
    expect(second.lines[0].metadata.client_id).toBe(first.lines[0].metadata.client_id);

    // the contacts rebuild docs/contacts.md asks of an upgrade from before review 22 (trims every field's history),
    // run by the new CLI while the old serve still applies and answers
    let rebuilding = true;
    const beside = (async () => {
      for (let i = 700; rebuilding; i++) note('old-rebuild', await traffic(a.url, i));
    })();
    const rebuilt = spawnSync(process.execPath, [BUILT_CLI, 'projections', 'rebuild', 'contacts'], { env: envFor(), encoding: 'utf8' });
    rebuilding = false;
    await beside;
    expect({ status: rebuilt.status, stderr: rebuilt.stderr }).toEqual({ status: 0, stderr: '' });
    for (let i = 800; i < 803; i++) {
      note('new', await traffic(b.url, i));
      note('old', await traffic(a.url, i + 1000));
    }
    expect((await bulk(a.url, 400)).status).toBe(202);

    // the old one replaced by a second new one
    expect(await stop(a.proc).then(() => a.proc.child.exitCode)).toBe(0);
    const c = await startServe(BUILT_CLI, envFor());
    procs.push(c.proc);
    for (let i = 500; i < 505; i++) note('new2', await traffic(c.url, i));
    await stop(oldWorker);
    expect(oldWorker.child.exitCode).toBe(0);
    const newWorker = start(BUILT_CLI, ['worker'], envFor());
    procs.push(newWorker);
    for (let i = 600; i < 603; i++) note('new2', await traffic(c.url, i));

    const bad = seen.filter(([, , code]) => code >= 400);
    expect(bad).toEqual([]);

    // every projection running, none rebuilt by either version
    const checkpoints = await db.pool.query(`SELECT name, state FROM projections.checkpoints WHERE state <> 'running'`);
    expect(checkpoints.rows).toEqual([]);
    for (const p of [a.proc, a2.proc, b.proc, c.proc, oldWorker, newWorker]) expect(p.out()).not.toMatch(/rebuil|failing|"level":(50|60)/i);

    // the field history: the last 10 versions of `visits` once the new code applied a change of it
    note('new2', await traffic(c.url, 999));
    const history = await db.pool.query(
      `SELECT count(*)::int AS n, max(version) AS top FROM rm_contacts.field_history WHERE field_id = 502`);
    expect(history.rows[0].n).toBe(10);

    // every delivery of the outbox sent once (none lost, none twice)
    let deliveries: string[] = [];
    for (let i = 0; i < 600; i++) {
      const r = await db.pool.query<{ webhook_id: string; status: string }>(`SELECT webhook_id, status FROM webhooks.deliveries`);
      deliveries = r.rows.map((x) => x.webhook_id).sort();
      if (r.rows.every((x) => x.status === 'succeeded') && received.length >= r.rows.length) break;
      await new Promise((ok) => setTimeout(ok, 200));
    }
    expect(deliveries.length).toBeGreaterThan(50);
    expect([...received].sort()).toEqual(deliveries);
  }, TIMEOUT);

  it('a start of the new version with a short ANONYMIZATION_SECRET is refused in one line, before any migration', async () => {
    const fresh = await createTestDatabase({ migrate: false });
    const env = { ...envFor({ ANONYMIZATION_SECRET: 'short-secret' }), DATABASE_URL: fresh.url };
    const r = spawnSync(process.execPath, [BUILT_CLI, 'serve'], { env: { ...env, PORT: '0' }, encoding: 'utf8', timeout: 60_000 });
    const tables = await fresh.pool.query(`SELECT 1 FROM pg_tables WHERE tablename = 'schema_migrations'`);
    await fresh.drop();
    expect(tables.rowCount).toBe(0);
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/ANONYMIZATION_SECRET.*too short \(12 characters, at least 16\)/);
  }, TIMEOUT);
});
