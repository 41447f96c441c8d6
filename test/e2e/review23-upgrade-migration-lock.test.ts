import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { SERVE_LISTENING_LINE } from '../support/cli-process';
import { BUILT_CLI, describeWithBuiltCli, e2eServerEnv } from '../support/e2e-server';
import { buildOldRelease, oldReleaseUnavailable } from '../support/review23-old-release';

// Review 23: migration 0019 (a partial index on webhooks.deliveries, built in its transaction) applied by the first
// new `serve` while an old one (dfef5d9) serves on the same database, with a large outbox: the old process's writes to
// webhooks.deliveries wait for the build (not refused), its API keeps answering, and the build waits for a session
// holding a write lock on the table (nothing bounds that wait; the starting process says nothing meanwhile).
// The old release is built as in review23-upgrade-rolling (REVIEW23_OLD_TREE names a built tree to reuse).

const OLD_COMMIT = 'dfef5d9';
const FIXTURE = '/work/shared/contracts/example-fixture.json';
const TIMEOUT = 900_000;
const ROWS = Number(process.env.REVIEW23_DELIVERIES ?? 20_000);

interface Proc { child: ChildProcess; out: () => string; exited: Promise<number | null> }

function start(cli: string, args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, [cli, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return { child, out: () => out, exited: new Promise((ok) => child.once('exit', (code) => ok(code))) };
}

async function waitListening(proc: Proc, tries = 2400): Promise<string> {
  for (let i = 0; i < tries; i++) {
    const m = SERVE_LISTENING_LINE.exec(proc.out());
    if (m) return m[1];
    if (proc.child.exitCode !== null) throw new Error(`serve exited: ${proc.out()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`serve printed no URL: ${proc.out()}`);
}


const unavailable = oldReleaseUnavailable(OLD_COMMIT);
if (unavailable) console.warn(`review23 migration 0019 beside an old serve skipped: ${unavailable}`);
const d = unavailable ? describe.skip : describeWithBuiltCli('review23 migration 0019 beside an old serve');

d(`migration 0019 applied beside a ${OLD_COMMIT} serve`, () => {
  let db: TestDatabase;
  let old: { dir: string; owned: boolean };
  const dirs: string[] = [];
  const procs: Proc[] = [];
  const envFor = () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'review23-lock-data-'));
    dirs.push(dataDir);
    return e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'warn' });
  };

  beforeAll(async () => {
    old = buildOldRelease(OLD_COMMIT);
    db = await createTestDatabase({ migrate: false });
  }, TIMEOUT);

  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) { p.child.kill('SIGKILL'); await p.exited; }
    await db?.drop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    if (old?.owned) rmSync(old.dir, { recursive: true, force: true });
  }, TIMEOUT);

  it('old writes to the outbox wait for the build and are not refused; the build waits for a session holding the table', async () => {
    const oldEnv = envFor();
    const r = spawnSync(process.execPath, [join(old.dir, 'dist/cli.js'), 'seed', FIXTURE], { env: oldEnv, encoding: 'utf8' });
    expect(r.status).toBe(0);
    // a large outbox as the old release left it: ROWS deliveries of ~1 KB, 1 in 20 set aside
    await db.pool.query(
      `INSERT INTO webhooks.deliveries (delivery_id, endpoint_id, company_id, webhook_id, event_type, payload, status, attempts, next_attempt_at, created_at, completed_at)
       SELECT gen_random_uuid(), 'ep', 101, 'wh' || g, 'message.sent', repeat('x', 1000),
              CASE WHEN g % 20 = 0 THEN 'pending' ELSE 'succeeded' END, 1,
              NULL, now() - interval '1 day', CASE WHEN g % 20 = 0 THEN NULL ELSE now() END
         FROM generate_series(1, ${ROWS}) g`);
    await db.pool.query('ANALYZE webhooks.deliveries');
    const a = start(join(old.dir, 'dist/cli.js'), ['serve'], { ...oldEnv, PORT: '0' });
    procs.push(a);
    const oldUrl = await waitListening(a);

    // a session holding a write lock on the outbox (an operator's open transaction): the build waits for it
    const holder = new Client({ connectionString: db.url });
    holder.on('error', () => undefined);
    await holder.connect();
    await holder.query(`BEGIN; UPDATE webhooks.deliveries SET attempts = attempts WHERE webhook_id = 'wh1'`);

    // the check docs/upgrades.md gives the operator before the start finds that session
    const holders = await db.pool.query(
      `SELECT pid, application_name, xact_start FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.relation = 'webhooks.deliveries'::regclass AND l.mode = 'RowExclusiveLock'`);
    expect(holders.rows.map((x) => x.pid)).toContain((holder as unknown as { processID: number }).processID);

    const began = Date.now();
    const b = start(BUILT_CLI, ['serve'], { ...envFor(), PORT: '0' });
    procs.push(b);
    // the start waits for the table lock: seen in pg_locks, not in its output
    let waiting = false;
    for (let i = 0; i < 200 && !waiting; i++) {
      const w = await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%Retention of set-aside webhook deliveries%'`);
      waiting = (w.rowCount ?? 0) > 0;
      if (!waiting) await new Promise((ok) => setTimeout(ok, 100));
    }
    if (!waiting) {
      const acts = await db.pool.query(`SELECT pid, state, wait_event_type, wait_event, left(query, 120) AS q FROM pg_stat_activity WHERE datname = current_database()`);
      console.log(JSON.stringify(acts.rows, null, 1), b.out());
    }
    expect(waiting).toBe(true);
    // meanwhile the old process answers reads (the API does not touch the outbox on these routes)
    const info = await fetch(`${oldUrl}/api/v1/business-info/`, { headers: { 'x-api-key': 'sbk_cn7f3a9d2e4b6c8a0f1e3d5c7b9a2468' } });
    expect(info.status).toBe(200);
    // and a write to the outbox queues behind the build
    const writer = new Client({ connectionString: db.url });
    writer.on('error', () => undefined);
    await writer.connect();
    const wrote = writer.query(`UPDATE webhooks.deliveries SET attempts = attempts WHERE webhook_id = 'wh2'`).then(() => Date.now());
    // the old process's webhook sender (its claim) queues behind the build's lock request as well
    let senderWaits = false;
    for (let i = 0; i < 100 && !senderWaits; i++) {
      const stalled = await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE webhooks.deliveries d SET next_attempt_at%'`);
      senderWaits = (stalled.rowCount ?? 0) > 0;
      if (!senderWaits) await new Promise((ok) => setTimeout(ok, 100));
    }
    expect(senderWaits).toBe(true);
    // the starting process says nothing while it waits
    expect(b.out()).not.toMatch(/lock|wait|deliveries|0019/i);
    await holder.query('ROLLBACK');
    await holder.end();
    const listening = await waitListening(b);
    const wroteAt = await wrote;
    await writer.end();
    const applied = await db.pool.query(`SELECT applied_at FROM public.schema_migrations WHERE version = 19`);
    expect(applied.rowCount).toBe(1);
    console.log(`new serve listening at ${listening}; ${ROWS} deliveries; the queued write went through ${wroteAt - began} ms after the start`);
    // and the old process logged no error while its writes waited
    expect(a.out()).not.toMatch(/"level":(50|60)/);
    const idx = await db.pool.query(`SELECT pg_relation_size('webhooks.deliveries_set_aside') AS size`);
    expect(Number(idx.rows[0].size)).toBeGreaterThan(0);
  }, TIMEOUT);
});
