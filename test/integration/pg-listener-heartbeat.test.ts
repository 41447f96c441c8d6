// A LISTEN connection that dies silently (its packets dropped: no error, no FIN, as after a failover or a dropped
// NAT entry) is found by the listener's heartbeat: the listener resets, connects again and listens, so the caches
// and workers built on it hear notifications again instead of never.
import { Client } from 'pg';
import { createPool } from '../../src/adapters/postgres/pool';
import { PgListener } from '../../src/shared/pg-listener';
import { blackholeProxyFor } from '../support/blackhole-proxy';
import { createTestDatabase, type TestDatabase } from '../support/db';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});
afterAll(() => db.drop());

const until = async (done: () => boolean, what: string) => {
  const deadline = Date.now() + 15_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

async function notify(payload: string): Promise<void> {
  const notifier = new Client({ connectionString: db.url });
  await notifier.connect();
  await notifier.query("SELECT pg_notify('listener_heartbeat', $1)", [payload]).finally(() => notifier.end());
}

it('a silently dead LISTEN connection is replaced, and notifications are heard again', async () => {
  const { proxy, url } = await blackholeProxyFor(db.url);
  const pool = createPool(url, 4);
  const heard: string[] = [];
  let resets = 0;
  let listening = 0;
  const listener = new PgListener(pool, ['listener_heartbeat'], {
    onNotify: (_c, p) => heard.push(p ?? ''),
    onReset: () => resets++,
    onListening: () => listening++,
  }, { heartbeatMs: 100, heartbeatTimeoutMs: 300 });
  try {
    await listener.start();
    const first = listener.connection;
    await notify('before');
    await until(() => heard.includes('before'), 'the first notification heard');

    proxy.connections[0].frozen = true; // the network drops the LISTEN connection's packets from now on
    await notify('while dead'); // lost: the listener cannot hear it
    await until(() => listening === 2, 'the listener listening again on a new connection');
    expect(listener.connection).toBeDefined();
    expect(listener.connection).not.toBe(first);
    expect(resets).toBeGreaterThanOrEqual(3); // the first listen, the lost connection, the second listen

    await notify('after');
    await until(() => heard.includes('after'), 'a notification heard on the new connection');
    expect(heard).toEqual(['before', 'after']);
  } finally {
    await listener.stop();
    await pool.end();
    await proxy.stop();
  }
});

it('a listener stops even when its connection died silently', async () => {
  const { proxy, url } = await blackholeProxyFor(db.url);
  const pool = createPool(url, 4);
  const listener = new PgListener(pool, ['listener_heartbeat'], { onNotify: () => undefined, onReset: () => undefined }, {
    heartbeatMs: 60_000, heartbeatTimeoutMs: 300,
  });
  try {
    await listener.start();
    proxy.connections[0].frozen = true;
    await listener.stop(); // its UNLISTEN is never answered: the connection is closed instead of handed back
    await pool.end();
    expect(pool.totalCount).toBe(0);
  } finally {
    await proxy.stop();
  }
});
