import { Client } from 'pg';
import { waitingForSessionLock, withSessionLock } from '../../src/shared/tx';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Review 15f: a session lock's connection ends after 30 s idle while the lock is held (a paused holder loses it;
// test/e2e/review15-paused-locks.test.ts), and only then: the setting is undone when the lock is given back, the lock
// is taken once (given back, another session takes it at once), and a lock not taken sets nothing.

describe('review 15f: session locks bounded for a paused holder', () => {
  let db: TestDatabase;
  let other: Client;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 1 });
    other = new Client({ connectionString: db.url });
    await other.connect();
  });
  afterAll(async () => {
    await other?.end();
    await db?.drop();
  });

  const setting = async (c: { query: Client['query'] }) =>
    ((await c.query('SHOW idle_session_timeout')) as unknown as { rows: Array<{ idle_session_timeout: string }> }).rows[0].idle_session_timeout;
  const otherTakes = async (name: string) => {
    const ok = (await other.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [name])).rows[0].ok;
    if (ok) await other.query('SELECT pg_advisory_unlock(hashtext($1))', [name]);
    return ok;
  };

  it.each([
    ['withSessionLock', withSessionLock],
    ['waitingForSessionLock', waitingForSessionLock],
  ] as const)('%s: idle_session_timeout 30 s while held, undone after; the lock is free once given back', async (_, hold) => {
    const name = `review15f-${_}`;
    const during = await hold(db.pool, name, async (lock) => ({ timeout: await setting(lock), taken: await otherTakes(name) }));
    expect(during).toEqual({ timeout: '30s', taken: false });
    expect(await otherTakes(name)).toBe(true);
    // the pool's one connection, back in the pool
    expect(await setting(db.pool)).toBe('0');
  });

  it('a lock another session holds is not taken, and its connection keeps its setting', async () => {
    await other.query('SELECT pg_advisory_lock(hashtext($1))', ['review15f-busy']);
    try {
      expect(await withSessionLock(db.pool, 'review15f-busy', async () => 'ran')).toBeUndefined();
      expect(await setting(db.pool)).toBe('0');
    } finally {
      await other.query('SELECT pg_advisory_unlock(hashtext($1))', ['review15f-busy']);
    }
  });
});
