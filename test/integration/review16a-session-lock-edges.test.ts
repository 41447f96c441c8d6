import { Client, type Pool } from 'pg';
import { createPool } from '../../src/adapters/postgres/pool';
import { waitingForSessionLock, withSessionLock } from '../../src/shared/tx';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { waitUntil } from '../support/sends';

// Review 16a (regression review of 4f38717 and 74a4639): the session lock's idle bound and its heartbeat on the
// holder's own connection, at their edges. The heartbeat (SELECT 1 every 10 s) runs on the connection the holder uses:
// inside the holder's failed transaction it fails and is ignored, and the holder's own statements go on; a backend
// ended under the holder fails its work, the lock is free and the pool's next user gets a working connection; the
// value restored is the connection's own (the URL's options), not the server default.

describe('review 16a: session locks at their edges', () => {
  let db: TestDatabase;
  let other: Client;
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown) => void unhandled.push(err);

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    other = new Client({ connectionString: db.url });
    await other.connect();
    process.on('unhandledRejection', onUnhandled);
  });
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await other?.end();
    await db?.drop();
  });

  const setting = async (c: Pool | Client) => (await c.query<{ idle_session_timeout: string }>('SHOW idle_session_timeout')).rows[0].idle_session_timeout;
  const otherTakes = async (name: string) => {
    const ok = (await other.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [name])).rows[0].ok;
    if (ok) await other.query('SELECT pg_advisory_unlock(hashtext($1))', [name]);
    return ok;
  };
  const lastStatementOf = async (pid: number) =>
    (await other.query<{ query: string; state: string }>('SELECT query, state FROM pg_stat_activity WHERE pid = $1', [pid])).rows[0];

  it('a heartbeat inside the holder\'s failed transaction is ignored: the holder rolls back and goes on', async () => {
    const name = 'review16a-aborted';
    const result = await withSessionLock(db.pool, name, async (lock) => {
      const pid = (await lock.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      await lock.query('BEGIN');
      await expect(lock.query('SELECT 1/0')).rejects.toThrow(/division by zero/);
      // a heartbeat ran in the failed transaction (it failed there too: 25P02)
      await waitUntil(async () => {
        const s = await lastStatementOf(pid);
        return s?.query === 'SELECT 1' && s.state === 'idle in transaction (aborted)';
      }, 40_000, 'a heartbeat in the failed transaction');
      await lock.query('ROLLBACK');
      return { v: (await lock.query<{ v: number }>('SELECT 2 AS v')).rows[0].v, timeout: await setting(lock as unknown as Client), taken: await otherTakes(name) };
    });
    expect(result).toEqual({ v: 2, timeout: '30s', taken: false });
    expect(await otherTakes(name)).toBe(true);
    // both pooled connections: the setting undone on the one that held the lock
    const [a, b] = [await db.pool.connect(), await db.pool.connect()];
    try {
      expect([await setting(a as unknown as Client), await setting(b as unknown as Client)]).toEqual(['0', '0']);
    } finally {
      a.release();
      b.release();
    }
    expect(unhandled).toEqual([]);
  }, 60_000);

  it('a backend ended under the holder: its work fails, the lock is free, no crash, the pool serves the next user', async () => {
    const name = 'review16a-terminated';
    let pid = 0;
    let go!: () => void;
    const resumed = new Promise<void>((r) => (go = r));
    const held = waitingForSessionLock(db.pool, name, async (lock) => {
      pid = (await lock.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      await resumed; // idle while its backend is ended (as Postgres does after 30 s with a paused holder)
      return (await lock.query('SELECT 1 AS v')).rows[0];
    });
    held.catch(() => undefined);
    await waitUntil(async () => pid !== 0, 10_000, 'the lock taken');
    await other.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitUntil(async () => (await other.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount === 0, 10_000, 'the backend gone');
    expect(await otherTakes(name)).toBe(true);
    go();
    await expect(held).rejects.toThrow();
    // the pool's next users: working connections with the default setting
    const rows = await Promise.all([db.pool.query('SELECT 1 AS v'), db.pool.query('SELECT 2 AS v')]);
    expect(rows.map((r) => r.rows[0].v)).toEqual([1, 2]);
    expect(await setting(db.pool)).toBe('0');
    expect(unhandled).toEqual([]);
  });

  it("gives back the connection's own idle_session_timeout (the URL's options), not the server's default", async () => {
    const url = new URL(db.url);
    url.searchParams.set('options', '-c idle_session_timeout=45s');
    const pool = createPool(url.toString(), 1);
    try {
      expect(await setting(pool)).toBe('45s');
      const during = await withSessionLock(pool, 'review16a-url', async (lock) => setting(lock as unknown as Client));
      expect(during).toBe('30s');
      expect(await setting(pool)).toBe('45s');
      // a lock another session holds: nothing changed
      await other.query('SELECT pg_advisory_lock(hashtext($1))', ['review16a-url']);
      try {
        expect(await withSessionLock(pool, 'review16a-url', async () => 'ran')).toBeUndefined();
        expect(await setting(pool)).toBe('45s');
      } finally {
        await other.query('SELECT pg_advisory_unlock(hashtext($1))', ['review16a-url']);
      }
    } finally {
      await pool.end();
    }
  });
});
