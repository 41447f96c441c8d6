import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Review 19 (the event log, docs/event-log.md): positions on Postgres are the writing server's transaction ids. A log
// restored with pg_dump into a server whose transaction counter is behind (a new one) read as not yet committed, and
// every event appended there was ordered before it: below the projections' checkpoints, never read (sends acknowledged
// and never seen by a read model). A start on such a database now stops with one line naming the cause and the fix,
// before anything is appended. The restore is made as pg_restore writes it: rows whose tx_id is a million ahead of
// this server's counter.

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'dist', 'cli.js');
jest.setTimeout(120_000);

describe('review 19: a log restored into a Postgres server behind the one that wrote it', () => {
  let db: TestDatabase;
  let dir: string;
  const run = (args: string[]) => spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT, encoding: 'utf8', timeout: 90_000,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, DATA_DIR: join(dir, 'data'), ANONYMIZATION_SECRET: 'review19-restored-anonymization-secret', API_KEY_PEPPER: 'review19-restored-pepper', PORT: '0', HOST: '127.0.0.1' },
  });

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'sb-review19-restored-'));
  });
  afterAll(async () => {
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the server that wrote the log starts; a log a million transactions ahead stops every start with one line, nothing appended', async () => {
    const status = run(['projections', 'status']);
    expect({ status: status.status, stderr: status.stderr }).toEqual({ status: 0, stderr: '' });

    await db.pool.query(
      `INSERT INTO es.events (tx_id, stream_id, stream_revision, event_id, type, data, metadata)
       VALUES (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000, 'restored-1', 0, gen_random_uuid(), 'Restored', '{}', '{}')`);
    const before = (await db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows[0].n;
    for (const args of [['projections', 'status'], ['serve']]) {
      const r = run(args);
      const lines = r.stderr.trim().split('\n');
      expect({ args, status: r.status, lines: lines.length }).toEqual({ args, status: 1, lines: 1 });
      expect(lines[0]).toMatch(/^switchboard: cannot start: the event log's newest position \(transaction \d+\) is ahead of the next transaction id \(\d+\) of Postgres at [^ ]+\/sbt_\w+: the database was restored with pg_dump .+; restore a physical copy instead \(pg_basebackup, or the data directory\), or keep using the server that wrote it \(docs\/event-log\.md, "Restoring a log"\)$/);
    }
    expect((await db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows[0].n).toBe(before);
  });
});
