import { type ChildProcess, spawn } from 'node:child_process';
import { Client } from 'pg';
import { stuckListenerWatch } from '../../src/workers/stuck-listeners';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { waitUntil } from '../support/sends';

// Review 16b found a paused process's LISTEN connection stuck: once the notifications sent to it fill the socket
// buffers, its backend waits in ClientWrite (idle) and Postgres cannot trim its notification queue past it (at 8 GB
// every NOTIFY fails, and every event append with it). The watch ends such a session once seen stuck at every look
// for its bound; a live listener is left alone. A real client in a child process, paused with SIGSTOP.

const CHANNEL = 'stuck_listener_test';
const LISTENER = `
const { Client } = require('pg');
const c = new Client({ connectionString: process.argv[1], application_name: 'stuck-listener-child' });
c.connect().then(() => c.query('LISTEN ${CHANNEL}')).then(() => process.stdout.write('listening\\n'));
c.on('notification', () => undefined);
setInterval(() => undefined, 1000);
`;

describe('stuck listener watch', () => {
  let db: TestDatabase;
  let child: ChildProcess | undefined;
  let live: Client | undefined;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
  });
  afterAll(async () => {
    child?.kill('SIGCONT');
    child?.kill('SIGKILL');
    await live?.end().catch(() => undefined);
    await db?.drop();
  });

  it("ends a paused client's LISTEN session stuck writing, once seen stuck for the bound, and leaves a live one", async () => {
    live = new Client({ connectionString: db.url, application_name: 'stuck-listener-live' });
    await live.connect();
    await live.query(`LISTEN ${CHANNEL}`);
    live.on('notification', () => undefined);

    child = spawn(process.execPath, ['-e', LISTENER, db.url], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((ok) => child!.stdout!.on('data', (d: Buffer) => d.toString().includes('listening') && ok()));
    const pidOf = async (app: string) =>
      (await db.pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [app])).rows[0]?.pid;
    const childPid = await pidOf('stuck-listener-child');
    const livePid = await pidOf('stuck-listener-live');
    expect(childPid).toBeDefined();
    child.kill('SIGSTOP');

    // notifications until the paused client's socket buffers are full: its backend waits to write, idle
    const payload = 'x'.repeat(7_900);
    const stuck = async () => (await db.pool.query(
      `SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'idle' AND wait_event = 'ClientWrite'`, [childPid])).rows.length === 1;
    await waitUntil(async () => {
      for (let i = 0; i < 200; i++) await db.pool.query('SELECT pg_notify($1, $2)', [CHANNEL, payload]);
      return stuck();
    }, 120_000, "the paused client's backend stuck in ClientWrite");

    let clock = 1_000_000;
    const look = stuckListenerWatch(db.pool, { stuckMs: 60_000, now: () => clock });
    expect(await look()).toEqual([]); // first seen now: not yet
    clock += 59_999;
    expect(await look()).toEqual([]);
    clock += 1;
    const ended = await look();
    expect(ended).toEqual([expect.objectContaining({ pid: childPid, applicationName: 'stuck-listener-child', stuckForS: 60 })]);
    await waitUntil(async () => (await pidOf('stuck-listener-child')) === undefined, 30_000, 'the stuck session to end');
    expect(await pidOf('stuck-listener-live')).toBe(livePid);
    // the live listener still gets notifications
    const got = new Promise<string>((ok) => live!.once('notification', (n) => ok(n.payload ?? '')));
    await db.pool.query('SELECT pg_notify($1, $2)', [CHANNEL, 'after']);
    await expect(got).resolves.toBeDefined();
  }, 180_000);

});
