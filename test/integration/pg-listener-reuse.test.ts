// A stopped PgListener hands its connection back to the pool: the pool's next user of that connection (here a second
// listener on the same channel, on a pool of one) must not call the stopped listener's handlers.
import { Client } from 'pg';
import { PgListener } from '../../src/shared/pg-listener';
import { createTestDatabase, type TestDatabase } from '../support/db';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase({ migrate: false, poolSize: 1 });
});
afterAll(() => db.drop());

const until = async (done: () => boolean, what: string) => {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

it('a stopped listener hears nothing through its connection\'s next user', async () => {
  const heardByFirst: string[] = [];
  const first = new PgListener(db.pool, ['listener_reuse'], { onNotify: (_c, p) => heardByFirst.push(p ?? ''), onReset: () => undefined });
  await first.start();
  const firstConnection = first.connection;
  await first.stop();

  const heardBySecond: string[] = [];
  const second = new PgListener(db.pool, ['listener_reuse'], { onNotify: (_c, p) => heardBySecond.push(p ?? ''), onReset: () => undefined });
  await second.start();
  try {
    expect(second.connection).toBe(firstConnection); // the pool's one connection, reused
    const notifier = new Client({ connectionString: db.url }); // the pool's one connection is the listener's
    await notifier.connect();
    await notifier.query("SELECT pg_notify('listener_reuse', 'after the first stopped')").finally(() => notifier.end());
    await until(() => heardBySecond.length > 0, 'the second listener heard the notification');
    expect(heardBySecond).toEqual(['after the first stopped']);
    expect(heardByFirst).toEqual([]);
  } finally {
    await second.stop();
  }
});
