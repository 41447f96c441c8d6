import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { createPool } from '../../src/adapters/postgres/pool';
import { stuckListenerWatch } from '../../src/workers/stuck-listeners';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { waitUntil } from '../support/sends';

// Review 17 of the stuck-listener watch (1efe43a): it ended sessions it should not.
// - another user's session stuck in ClientWrite was ended (not ours); and a role that sees others' states
//   (pg_read_all_stats) but may not signal them had its whole look fail on the refusal;
// - "seen stuck at every look for the bound" was two sightings the bound apart when the looks stopped in between
//   (this process paused, looks failing): a session seen stuck at both was ended without being watched in between.
// Real clients in child processes, paused with SIGSTOP and flooded with notifications until their backends wait in
// ClientWrite; the watch's clock is a counter.

const CHANNEL = 'stuck_listener_r17';
const LISTENER = `
const { Client } = require('pg');
const c = new Client({ connectionString: process.argv[1], application_name: process.argv[2] });
c.connect().then(() => c.query('LISTEN ${CHANNEL}')).then(() => process.stdout.write('listening\\n'));
c.on('notification', () => undefined);
setInterval(() => undefined, 1000);
`;

function withUser(url: string, user: string, password: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = password;
  return u.toString();
}

describe('stuck listener watch (review 17)', () => {
  let db: TestDatabase;
  const children: ChildProcess[] = [];
  const suffix = randomBytes(4).toString('hex');
  const other = `sbt_r17_other_${suffix}`;
  const watcher = `sbt_r17_watch_${suffix}`;
  const password = randomBytes(12).toString('hex');
  const pools: Array<{ end(): Promise<void> }> = [];
  let noRoles: string | undefined;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    try {
      await db.pool.query(`CREATE ROLE ${other} LOGIN PASSWORD '${password}'`);
      await db.pool.query(`CREATE ROLE ${watcher} LOGIN PASSWORD '${password}' IN ROLE pg_read_all_stats`);
    } catch (err) {
      // a DATABASE_URL whose role may not create roles: the other-user case cannot be set up there
      noRoles = `the test database's role may not create roles (${(err as Error).message})`;
    }
  });
  afterAll(async () => {
    for (const c of children) {
      c.kill('SIGCONT');
      c.kill('SIGKILL');
    }
    for (const p of pools) await p.end().catch(() => undefined);
    await db?.drop();
    const admin = new Client({ connectionString: process.env.TEST_DATABASE_URL });
    await admin.connect();
    try {
      await admin.query(`DROP ROLE IF EXISTS ${other}`);
      await admin.query(`DROP ROLE IF EXISTS ${watcher}`);
    } finally {
      await admin.end();
    }
  });

  const pidOf = async (app: string) =>
    (await db.pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [app]))
      .rows[0]?.pid;

  /** a child process listening on its own connection, paused, its backend flooded until it waits in ClientWrite */
  async function stuckListener(url: string, app: string): Promise<number> {
    const child = spawn(process.execPath, ['-e', LISTENER, url, app], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await new Promise<void>((ok) => child.stdout!.on('data', (d: Buffer) => d.toString().includes('listening') && ok()));
    const pid = await pidOf(app);
    expect(pid).toBeDefined();
    child.kill('SIGSTOP');
    const payload = 'x'.repeat(7_900);
    const stuck = async () =>
      (await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'idle' AND wait_event = 'ClientWrite'`, [pid])).rows.length === 1;
    await waitUntil(async () => {
      for (let i = 0; i < 200; i++) await db.pool.query('SELECT pg_notify($1, $2)', [CHANNEL, payload]);
      return stuck();
    }, 120_000, `${app}'s backend stuck in ClientWrite`);
    return pid!;
  }

  it("leaves another user's stuck session alone, and a role that may not end it still ends its own", async () => {
    if (noRoles) {
      console.warn(`skipped: ${noRoles}`);
      return;
    }
    const othersPid = await stuckListener(withUser(db.url, other, password), 'r17-other-user');
    const watcherUrl = withUser(db.url, watcher, password);
    const ownPid = await stuckListener(watcherUrl, 'r17-watcher-own');
    const watcherPool = createPool(watcherUrl, 2);
    pools.push(watcherPool);

    let clock = 1_000_000;
    const refused: number[] = [];
    const look = stuckListenerWatch(watcherPool, { stuckMs: 60_000, lookEveryMs: 30_000, now: () => clock, onRefused: (pid) => refused.push(pid) });
    expect(await look()).toEqual([]);
    clock += 30_000;
    expect(await look()).toEqual([]);
    clock += 30_000;
    // only its own session is a candidate: ended; the other user's was never tried
    expect(await look()).toEqual([expect.objectContaining({ pid: ownPid, applicationName: 'r17-watcher-own' })]);
    expect(refused).toEqual([]);
    await waitUntil(async () => (await pidOf('r17-watcher-own')) === undefined, 30_000, 'its own stuck session to end');

    // the superuser's watch (the test pool's role) does not end a session of another user either
    let clock2 = 1_000_000;
    const superLook = stuckListenerWatch(db.pool, { stuckMs: 60_000, lookEveryMs: 30_000, now: () => clock2 });
    for (let i = 0; i < 4; i++) {
      expect(await superLook()).toEqual([]);
      clock2 += 30_000;
    }
    expect(await pidOf('r17-other-user')).toBe(othersPid);
  }, 300_000);

  it('does not count a stuck session seen before a gap in the looks: it is watched the whole bound again', async () => {
    const pid = await stuckListener(db.url, 'r17-gap');
    let clock = 1_000_000;
    const look = stuckListenerWatch(db.pool, { stuckMs: 60_000, lookEveryMs: 30_000, now: () => clock });
    expect(await look()).toEqual([]);
    clock += 5 * 60_000; // no look for 5 minutes (this process paused)
    expect(await look()).toEqual([]);
    expect(await pidOf('r17-gap')).toBe(pid);
    clock += 30_000;
    expect(await look()).toEqual([]);
    clock += 30_000;
    expect(await look()).toEqual([expect.objectContaining({ pid, applicationName: 'r17-gap', stuckForS: 60 })]);
    await waitUntil(async () => (await pidOf('r17-gap')) === undefined, 30_000, 'the stuck session to end');
  }, 300_000);
});
