import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, freePort, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';
import { waitUntil } from '../support/sends';

// Review 11: the edges of `switchboard events` (built CLI, test database): `events schemas` into a closed pipe or a
// full disk, an empty --type, a stored event its schema refuses, and an export whose reader goes away mid-stream.

const SECRETS = { ANONYMIZATION_SECRET: 'review11-anonymization-secret', API_KEY_PEPPER: 'review11-api-key-pepper' };

const d = describeWithBuiltCli('review11 events errors suite');

d('review11: events export and schemas at their edges', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'review11-events-errors-'));
    env = { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, ...SECRETS, DATA_DIR: join(dir, 'data'), PORT: String(await freePort()) };
  });
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function run(args: string[], stdout: 'pipe' | number = 'pipe') {
    const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000, stdio: ['ignore', stdout, 'pipe'] });
    return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr, lines: r.stderr.split('\n').filter((l) => l.trim() !== '') };
  }

  /** Reads the first line of stdout, then closes the pipe (as `| head -1`). */
  function firstLineThenClose(args: string[]): Promise<{ status: number | null; first: string; stderr: string }> {
    return new Promise((ok) => {
      const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.includes('\n')) child.stdout.destroy();
      });
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', (status) => ok({ status, first: out.split('\n')[0], stderr }));
    });
  }

  const insert = (stream: string, revision: number, type: string, data: unknown) =>
    db.pool.query<{ position: string }>(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ($1, $2, $3, $4, $5, $6)
       RETURNING tx_id || ':' || seq AS position`,
      [stream, revision, randomUUID(), type, data,
        { eventId: randomUUID(), correlationId: randomUUID(), causationId: null, companyId: 7, actor: 'cli', at: new Date().toISOString(), schemaVersion: 1 }],
    ).then((r) => r.rows[0].position);

  /**
   * Until every event committed so far is below the log's horizon (the oldest transaction still running anywhere on the
   * cluster: another test file's may be): `events export` writes what is readable now and ends (docs/event-log.md),
   * so an export run at once after the inserts, while another file's transaction was open, exported none of them.
   */
  const readableNow = () => waitUntil(async () => (await db.pool.query<{ ok: boolean }>(
    `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint > coalesce((SELECT max(tx_id) FROM es.events), 0) AS ok`,
  )).rows[0].ok || undefined, 60_000, 'the inserted events readable');

  it('events schemas whose reader goes away (`| head -1`) ends quietly with status 0', async () => {
    const child = spawn(process.execPath, [CLI, 'events', 'schemas'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy(); // the reader is gone before the first line (its pipe would otherwise take all of them)
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const status = await new Promise<number | null>((ok) => child.on('close', (code) => ok(code)));
    expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
  });

  it('events schemas to a full disk is one line naming it, status 1', () => {
    const full = openSync('/dev/full', 'w');
    try {
      const r = run(['events', 'schemas'], full);
      expect({ status: r.status, lines: r.lines }).toEqual({ status: 1, lines: ['switchboard: cannot write the schemas (ENOSPC)'] });
    } finally {
      closeSync(full);
    }
  });

  it.each([[''], [' '], ['OperatorRegistered,']])('events export --type %j is one line, not a silently unfiltered export', (types) => {
    const r = run(['events', 'export', '--type', types]);
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 1, stdout: '' });
    expect(r.lines).toEqual([
      `switchboard: --type ${JSON.stringify(types)}: an empty event type; give comma-separated event types (\`switchboard events schemas\` lists them)`,
    ]);
  });

  it('an export whose reader goes away mid-stream ends quietly with status 0', async () => {
    await db.pool.query(`INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
      SELECT 'review11-bulk-' || g, 0, gen_random_uuid(), 'OperatorRegistered', jsonb_build_object('companyId', 7, 'operatorId', g, 'name', 'x'),
        jsonb_build_object('eventId', gen_random_uuid(), 'correlationId', gen_random_uuid(), 'causationId', null, 'companyId', 7,
          'actor', 'cli', 'at', now()::text, 'schemaVersion', 1)
      FROM generate_series(1, 20000) g`);
    await readableNow();
    const r = await firstLineThenClose(['events', 'export']);
    expect(JSON.parse(r.first)).toHaveProperty('position');
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  });

  it('a stored event its schema refuses: the lines before it, then one line naming the position to resume from', async () => {
    const from = (await db.pool.query<{ p: string }>(`SELECT tx_id || ':' || seq AS p FROM es.events ORDER BY tx_id DESC, seq DESC LIMIT 1`)).rows[0]?.p ?? '';
    const good = await insert('review11-s', 0, 'OperatorRegistered', { companyId: 7, operatorId: 1, name: 'a' });
    await insert('review11-s', 1, 'OperatorRegistered', { companyId: 7, operatorId: 'not a number', name: 'b' });
    const after = await insert('review11-s', 2, 'OperatorRegistered', { companyId: 7, operatorId: 3, name: 'c' });
    await readableNow();

    const r = run(['events', 'export', '--from', from]);
    expect(r.status).toBe(1);
    expect(r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).position)).toEqual([good]);
    expect(r.lines).toEqual([
      `switchboard: the event after position "${good}" cannot be exported: OperatorRegistered does not match its schema: /operatorId must be integer; `
        + `the lines before it are complete (it needs an upcaster or a fix of the stored event; then resume with --from "${good}")`,
    ]);
    expect(r.stderr).not.toMatch(STACK_LINE);
    // once the stored event is fixed, the resume takes it and the rest
    await db.pool.query(`UPDATE es.events SET data = jsonb_set(data, '{operatorId}', '2') WHERE stream_id = 'review11-s' AND stream_revision = 1`);
    const resumed = run(['events', 'export', '--from', good]);
    expect(resumed.status).toBe(0);
    const positions = resumed.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).position);
    expect(positions).toHaveLength(2);
    expect(positions[1]).toBe(after);
  });
});
