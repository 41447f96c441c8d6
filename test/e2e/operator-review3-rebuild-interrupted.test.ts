import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCli } from '../support/cli-process';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';

// Found in review: a `projections rebuild` killed mid-replay (kill -9, an OOM kill, a lost terminal) left the
// checkpoint `rebuilding` and a partial `rm_<name>__next` schema: `projections status` said `rebuilding` with no
// rebuild running, and the partial tables stayed until the next rebuild of that projection. Now status tells a
// running rebuild (its guard is held) from an interrupted one, and the next `serve` or `worker` drops what it left.

const d = describeWithBuiltCli('interrupted rebuild suite');

const EVENTS = 16_000;

d('a projections rebuild killed mid-replay (built CLI, a real kill -9)', () => {
  let db: TestDatabase;
  let dataDir: string;
  const env = (extra: NodeJS.ProcessEnv = {}) => e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'warn' }, extra);
  const cli = (args: string[]) => spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, env: env(), encoding: 'utf8', timeout: 120_000 });
  const status = () => {
    const r = cli(['projections', 'status', '--json']);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    return r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { name: string; state: string; error: string | null })
      .find((row) => row.name === 'ratelimits')!;
  };
  const checkpoint = async () =>
    (await db.pool.query<{ state: string; error: string | null }>(`SELECT state, error FROM projections.checkpoints WHERE name = 'ratelimits'`)).rows[0];
  const nextSchemaExists = async () =>
    (await db.pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'rm_ratelimits__next'`)).rowCount === 1;

  beforeAll(async () => {
    db = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'sb-rebuild-killed-'));
    // a log long enough for the replay to take a while: one operator's limit set many times over
    await db.pool.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
       SELECT 'company-' || (g % 500 + 1), g / 500, e.id, 'CompanyRateLimitSet',
              jsonb_build_object('companyId', g % 500 + 1, 'perMinute', 100 + g % 7),
              jsonb_build_object('eventId', e.id, 'correlationId', e.id, 'causationId', null, 'companyId', g % 500 + 1,
                                 'actor', 'cli', 'at', '2026-11-27T10:00:00.000Z')
         FROM generate_series(0, $1 - 1) g, LATERAL (SELECT md5('rate-limit-' || g)::uuid AS id) e`,
      [EVENTS],
    );
    // the live read model at the head: the next serve has nothing to apply, so nothing clears the note it leaves
    const built = cli(['projections', 'rebuild', 'ratelimits']);
    expect({ status: built.status, stderr: built.stderr }).toEqual({ status: 0, stderr: '' });
  }, 120_000);

  afterAll(async () => {
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('status says rebuilding only while a rebuild holds the guard', async () => {
    const other = await db.pool.connect(); // another process's rebuild, as far as status can tell
    try {
      await other.query(`SELECT pg_advisory_lock(hashtext('rebuild:ratelimits'))`);
      expect(status()).toMatchObject({ state: 'rebuilding' });
    } finally {
      await other.query('SELECT pg_advisory_unlock_all()');
      other.release();
    }
    expect(status()).toMatchObject({ state: 'running', error: null });
  });

  it('status names the interrupted rebuild and the next serve drops its partial tables', async () => {
    const rebuild = startCli(['projections', 'rebuild', 'ratelimits'], env(), { cwd: ROOT });
    await untilReplaying(rebuild.child);
    rebuild.child.kill('SIGKILL');
    expect((await rebuild.exited).signal).toBe('SIGKILL');

    // what the killed process left
    expect(await checkpoint()).toMatchObject({ state: 'rebuilding' });
    expect(await nextSchemaExists()).toBe(true);

    expect(status()).toEqual(expect.objectContaining({
      state: 'rebuild interrupted',
      error: 'a rebuild stopped before its swap (its process ended): the live tables serve as before; the next start of '
        + '`serve` or `worker` drops its partial tables (rm_ratelimits__next), or run `switchboard projections rebuild ratelimits` again',
    }));
    const table = cli(['projections', 'status']);
    expect(table.stdout).toMatch(/^ratelimits .* rebuild interrupted \(a rebuild stopped before its swap/m);

    const serve = startCli(['serve'], env(), { cwd: ROOT });
    try {
      await serve.untilOutput('switchboard listening on', Infinity);
      expect(serve.output()).toContain("an interrupted rebuild's partial tables were dropped");
      expect(await nextSchemaExists()).toBe(false);
      expect(await checkpoint()).toEqual({ state: 'running', error: 'an interrupted rebuild\'s partial tables were dropped at start' });
      expect(status()).toMatchObject({ state: 'running' });
    } finally {
      await serve.stop();
    }
    expect(serve.output()).not.toMatch(STACK_LINE);

    const again = cli(['projections', 'rebuild', 'ratelimits']);
    expect({ status: again.status, stderr: again.stderr }).toEqual({ status: 0, stderr: '' });
    expect(await checkpoint()).toEqual({ state: 'running', error: null });
    expect((await db.pool.query('SELECT count(*)::int AS n FROM rm_ratelimits.company_limits')).rows[0].n).toBe(500);
  }, 180_000);

  /** Until the rebuild has replayed some batches into its fresh tables (and is still far from the end). */
  async function untilReplaying(child: ChildProcess): Promise<void> {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the rebuild ended (${child.exitCode}) before it could be killed`);
      const n = await db.pool
        .query<{ n: number }>('SELECT count(*)::int AS n FROM rm_ratelimits__next.company_limits')
        .then((r) => r.rows[0].n, () => 0);
      const { state } = await checkpoint();
      if (n > 0 && state === 'rebuilding') return;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
});
