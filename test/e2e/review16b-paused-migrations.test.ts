import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PoolClient } from 'pg';
import { type CliProcess, SERVE_LISTENING_LINE, startCli } from '../support/cli-process';
import { migrate, type MigrationsLockHolder } from '../../src/adapters/postgres/migrations';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { describeWithBuiltCli, e2eServerEnv } from '../support/e2e-server';

// Review 16b: a `serve` paused (SIGSTOP) while it holds the migrations' advisory lock at its start. Every other
// start (`serve`, `worker`) and every CLI command migrates first, under that lock: they waited for as long as the
// holder stayed paused, saying nothing. A is made to hold the lock deterministically: the test holds an ACCESS
// EXCLUSIVE lock on public.schema_migrations, so A's migration check waits holding the advisory lock; A is paused,
// the test's lock released: A's backend is then idle, holding the migrations' lock, its process stopped.
// B (`serve`) and a CLI command (`projections status`) started then must complete; A, resumed, must start too.

const A_NAME = 'sb-mig-paused-A';
/** A's backend holding the migrations' lock (pg_advisory_lock(7246001): classid 0, objid 7246001, objsubid 1) */
const holderSql = (state: string) => `SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = 7246001 AND l.objsubid = 1
    AND a.application_name = '${A_NAME}' AND a.datname = current_database() AND a.state ${state}`;

const d = describeWithBuiltCli('review 16b paused-migrations suite');

d('review 16b: a serve paused holding the migrations lock', () => {
  let db: TestDatabase;
  let dataDir: string;
  const started: CliProcess[] = [];
  let blocker: PoolClient | undefined;

  // PORT=0: each serve binds a port the system picks as it listens, its URL read from the line it prints then (a port
  // found free first could be taken before the child bound it, and the readiness poll answered by another process).
  // A and B start here rather than with startServeOnAnyPort: A prints its URL only once resumed, and B's start is
  // bounded below by the test's own deadline
  const envFor = (name: string) =>
    e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'info' }, { PGAPPNAME: name, RATE_LIMIT_ENABLED: 'false', STARTUP_WAIT_S: '120' });
  /** whether `serve` printed the URL it listens on and answers /readyz 200 there within `deadlineMs` */
  const ready = async (serve: CliProcess, deadlineMs: number): Promise<boolean> => {
    const until = Date.now() + deadlineMs;
    while (Date.now() < until) {
      const url = SERVE_LISTENING_LINE.exec(serve.stdout())?.[1];
      if (url && (await fetch(`${url}/readyz`).then((r) => r.status, () => 0)) === 200) return true;
      await new Promise((r) => setTimeout(r, 200));
    }
    return false;
  };
  const waitFor = async (sql: string, deadlineMs: number): Promise<number | undefined> => {
    const until = Date.now() + deadlineMs;
    while (Date.now() < until) {
      const pid = (await db.pool.query<{ pid: number }>(sql)).rows[0]?.pid;
      if (pid !== undefined) return pid;
      await new Promise((r) => setTimeout(r, 50));
    }
    return undefined;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'sb-mig-paused-'));
  });

  afterAll(async () => {
    if (blocker) await blocker.query('ROLLBACK').catch(() => undefined);
    blocker?.release();
    for (const p of started) {
      p.child.kill('SIGCONT');
      await p.kill();
    }
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("B's start and a CLI command complete while A stays paused holding the migrations lock; A resumed starts", async () => {
    blocker = await db.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE public.schema_migrations IN ACCESS EXCLUSIVE MODE');
    const A = startCli(['serve'], envFor(A_NAME));
    started.push(A);
    // A waits for the test's table lock, holding the migrations' lock
    const holding = await waitFor(holderSql("= 'active'"), 60_000);
    expect(holding).toBeDefined();
    process.kill(A.child.pid!, 'SIGSTOP');
    await blocker.query('COMMIT');
    blocker.release();
    blocker = undefined;
    // A's statement done: its session idle, the lock held, its process stopped
    const idleHolder = await waitFor(holderSql("= 'idle'"), 30_000);
    expect(idleHolder).toBe(holding);
    const pausedAt = Date.now();

    const B = startCli(['serve'], envFor('sb-mig-paused-B'));
    started.push(B);
    const cli = startCli(['projections', 'status'], envFor('sb-mig-paused-cli'));
    started.push(cli);
    // a generous bound, not a timing threshold: without the fix both wait for as long as A stays paused
    const bReady = await ready(B, 100_000);
    const bAfter = Date.now() - pausedAt;
    const cliExit = await Promise.race([cli.exited, new Promise<'waiting'>((r) => setTimeout(() => r('waiting'), Math.max(1, 100_000 - bAfter)))]);
    const holderGone = (await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [holding])).rows.length === 0;
    process.kill(A.child.pid!, 'SIGCONT');
    console.log(`B ready ${bReady} ${bAfter} ms after A was paused holding the migrations lock; the CLI command: ${JSON.stringify(cliExit)}; `
      + `B's warnings: ${B.output().split('\n').filter((l) => l.includes('"level":40')).map((l) => l.slice(0, 300)).join(' | ')}`);
    expect({ bReady, cli: cliExit === 'waiting' ? 'waiting' : cliExit.code, holderGone }).toEqual({ bReady: true, cli: 0, holderGone: true });
    expect(cli.stdout().length).toBeGreaterThan(0);
    // B said what it waited for, and who held it (src/main.ts passes migrate's onWaiting to the log)
    const waitingLine = B.output().split('\n').find((l) => l.includes('waiting for the migrations lock, held by another session'));
    expect(waitingLine).toContain(A_NAME);
    // A, resumed, finds its lock's session ended and starts all the same
    expect(await ready(A, 60_000)).toBe(true);
  }, 240_000);

  // CI on 62e14f6: dozens of `events export` processes starting at once waited a moment for each other's migrations
  // lock, and the warning the first failed try gave went into an export's NDJSON (a line without an event)
  it('a lock held a moment is waited for silently', async () => {
    const holder = await db.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(7246001)');
      const told: unknown[] = [];
      const running = migrate(db.pool, { onWaiting: (h) => told.push(h) });
      await new Promise((r) => setTimeout(r, 300));
      await holder.query('SELECT pg_advisory_unlock(7246001)');
      expect(await running).toEqual([]);
      expect(told).toEqual([]);
    } finally {
      holder.release();
    }
  });

  it('a migrate waiting for the lock says who holds it (onWaiting), then runs once it is given back', async () => {
    const holder = await db.pool.connect();
    try {
      await holder.query("SET application_name = 'r16b-holder'");
      await holder.query('SELECT pg_advisory_lock(7246001)');
      const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const told: Array<MigrationsLockHolder | undefined> = [];
      let done = false;
      const running = migrate(db.pool, { onWaiting: (h) => told.push(h) }).then((applied) => ((done = true), applied));
      const until = Date.now() + 30_000;
      while (told.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      expect({ done, holder: told[0] && { pid: told[0].pid, application_name: told[0].application_name } }).toEqual({ done: false, holder: { pid, application_name: 'r16b-holder' } });
      await holder.query('SELECT pg_advisory_unlock(7246001)');
      expect(await running).toEqual([]);
    } finally {
      holder.release();
    }
  }, 60_000);
});
