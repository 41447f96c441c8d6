import { spawnSync } from 'node:child_process';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';

// `switchboard projections rebuild NAME` while another process rebuilds that projection (an operator's second
// rebuild, or a version change's): one line naming it and what to do, exit 1, no stack trace.

const d = describeWithBuiltCli('rebuild running suite');

d('projections rebuild while another process rebuilds it (built CLI)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('says so in one line and exits 1', async () => {
    const other = await db.pool.connect(); // the other process's rebuild guard
    try {
      await other.query(`SELECT pg_advisory_lock(hashtext('rebuild:sends'))`);
      const r = spawnSync(process.execPath, [CLI, 'projections', 'rebuild', 'sends'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, ANONYMIZATION_SECRET: 'rebuild-running-anon', API_KEY_PEPPER: 'rebuild-running-pepper' },
        encoding: 'utf8',
        timeout: 60_000,
      });
      const lines = r.stderr.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('rebuilding '));
      expect({ status: r.status, lines }).toEqual({
        status: 1,
        lines: ['switchboard: a rebuild of sends is already running in another process (a version change\'s, or another `projections rebuild`); '
          + 'wait for it to end (`switchboard projections status`), then run the command again if it is still needed'],
      });
      expect(r.stderr).not.toMatch(STACK_LINE);
    } finally {
      await other.query(`SELECT pg_advisory_unlock_all()`);
      other.release();
    }
  });
});
