import { randomBytes, randomUUID } from 'node:crypto';
import { Client, type Pool, type PoolClient } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { type Position, START } from '../../src/ports/event-store';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { waitUntil } from '../support/sends';

// Review 15e of 509d976 (the log read below this database's own oldest running transaction once the cluster's stays
// put): many writers of this database commit late, in savepoints, under another role, with track_activities off,
// through PREPARE TRANSACTION when the cluster allows it, while another database keeps opening and closing a
// long writing transaction (so the stores switch between the cluster-wide and the own-database read mid-stream).
// Several stores share one pool, each following the log from its last position: each must get exactly what
// es.events holds, in (tx_id, seq) order, nothing missing, nothing twice.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rnd = (n: number) => Math.floor(Math.random() * n);

const INSERT = `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ($1, 0, $2, 'StressProbe', $3, $4)`;

async function insertEvent(c: PoolClient | Client | Pool, writer: number): Promise<string> {
  const id = randomUUID();
  await c.query(INSERT, [`stress-${id}`, id, { writer }, { eventId: id, correlationId: id, causationId: null, companyId: null, actor: 'test', at: new Date().toISOString() }]);
  return id;
}

/** a pool whose statements are counted by name: which read (cluster-wide or own-database) a store ran */
function counting(pool: Pool, counts: Record<string, number>): Pool {
  return {
    query: (cfg: unknown, values?: unknown) => {
      const name = (cfg as { name?: string })?.name;
      if (name) counts[name] = (counts[name] ?? 0) + 1;
      return (pool.query as (a: unknown, b?: unknown) => Promise<unknown>)(cfg, values);
    },
  } as unknown as Pool;
}

describe('review 15e: the own-database horizon under concurrent late commits', () => {
  let db: TestDatabase;
  let other: TestDatabase;
  let admin: Client;
  const role = `sbt_writer_${randomBytes(4).toString('hex')}`;
  const readerRole = `sbt_reader_${randomBytes(4).toString('hex')}`;
  let preparedAllowed = false;
  let superuser = false;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 30 });
    other = await createTestDatabase({ migrate: false, poolSize: 5 });
    admin = new Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'w'`);
    await admin.query(`CREATE ROLE ${readerRole} LOGIN PASSWORD 'r'`);
    await admin.query(`GRANT USAGE ON SCHEMA es TO ${role}, ${readerRole}`);
    await admin.query(`GRANT SELECT, INSERT ON es.events TO ${role}`);
    await admin.query(`GRANT SELECT ON es.events TO ${readerRole}`);
    await admin.query(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA es TO ${role}`);
    const { rows } = await admin.query<{ n: string }>("SELECT current_setting('max_prepared_transactions') AS n");
    preparedAllowed = Number(rows[0].n) > 0;
    superuser = (await admin.query<{ s: boolean }>('SELECT rolsuper AS s FROM pg_roles WHERE rolname = current_user')).rows[0].s;
    if (!superuser) process.stdout.write('[review15e] track_activities = off writers skipped: SET track_activities needs a superuser\n');
    await admin.end();
    if (!preparedAllowed) process.stdout.write('[review15e] PREPARE TRANSACTION writers skipped: max_prepared_transactions = 0 on the test cluster\n');
  });
  afterAll(async () => {
    await other?.drop();
    await db?.drop();
    const server = new Client({ connectionString: process.env.TEST_DATABASE_URL });
    await server.connect();
    await server.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    await server.query(`DROP ROLE IF EXISTS ${readerRole}`).catch(() => undefined);
    await server.end();
  });

  it('every store following the log gets exactly es.events, in (tx_id, seq) order', async () => {
    const roleUrl = (user: string, pw: string) => {
      const u = new URL(db.url);
      u.username = user;
      u.password = pw;
      return u.toString();
    };
    const writerRolePool = createPool(roleUrl(role, 'w'), 4);
    const readerRolePool = createPool(roleUrl(readerRole, 'r'), 3);
    let foreignRunning = true;

    // another database: a writing transaction opened, held 50..600 ms, closed, again (the cluster's horizon pinned, then moving)
    const foreign = (async () => {
      const c = await other.pool.connect();
      try {
        while (foreignRunning) {
          await c.query('BEGIN');
          await c.query('SELECT pg_current_xact_id()');
          await sleep(50 + rnd(550));
          await c.query('ROLLBACK');
          await sleep(rnd(100));
        }
      } finally {
        c.release();
      }
    })();

    const kinds = ['plain', 'savepoint', 'xid-first', 'rollback', 'role', 'untracked', 'prepared'] as const;
    const used: Record<string, number> = {};
    const writer = async (w: number, rounds: number) => {
      for (let i = 0; i < rounds; i++) {
        let kind = kinds[rnd(preparedAllowed ? kinds.length : kinds.length - 1)];
        if (kind === 'untracked' && !superuser) kind = 'plain';
        used[kind] = (used[kind] ?? 0) + 1;
        const c = await (kind === 'role' ? writerRolePool : db.pool).connect();
        try {
          if (kind === 'untracked') await c.query('SET track_activities = off');
          await c.query('BEGIN');
          if (kind === 'xid-first') {
            await c.query('SELECT pg_current_xact_id()'); // its id taken now, its events written much later
            await sleep(rnd(60));
          }
          if (kind === 'savepoint') {
            await c.query('SAVEPOINT a'); // the transaction's first write, and its id, inside a subtransaction
            await insertEvent(c, w);
            await c.query('SAVEPOINT b');
            await insertEvent(c, w);
            await c.query('ROLLBACK TO SAVEPOINT b'); // this one never was
            await c.query('RELEASE SAVEPOINT a');
          }
          for (let n = 1 + rnd(3); n > 0; n--) await insertEvent(c, w);
          await sleep(rnd(150)); // a late commit: others commit meanwhile, readers pass their events
          if (kind === 'rollback') await c.query('ROLLBACK');
          else if (kind === 'prepared') {
            const gid = `sbt-${randomUUID()}`;
            await c.query(`PREPARE TRANSACTION '${gid}'`);
            await sleep(rnd(80));
            await db.pool.query(`COMMIT PREPARED '${gid}'`); // from another connection
          } else await c.query('COMMIT');
          if (kind === 'untracked') await c.query('SET track_activities = on');
        } finally {
          c.release();
        }
      }
    };

    const counts: Array<Record<string, number>> = [];
    let head: Position | undefined; // the last event of es.events, once every writer is done
    const follower = async (pool: Pool, pinnedHorizonMs: number | undefined) => {
      const tally: Record<string, number> = {};
      counts.push(tally);
      const store = new PostgresEventStore(counting(pool, tally), pinnedHorizonMs === undefined ? {} : { pinnedHorizonMs });
      const got: Position[] = [];
      let at: Position = START;
      const deadline = Date.now() + 120_000;
      while (head === undefined || store.comparePositions(at, head) < 0) {
        if (Date.now() > deadline) throw new Error(`a follower stopped at ${at}, the head is ${head}`);
        const batch = await store.readAll(at, 1 + rnd(40));
        for (const e of batch.events) got.push(e.position);
        at = batch.nextPosition;
        if (batch.events.length === 0) await sleep(5);
      }
      return got;
    };

    const followers = [
      follower(db.pool, undefined), // the default: 250 ms
      follower(db.pool, 0), // the own-database read from the second read on
      follower(db.pool, 15), // switching back and forth
      follower(readerRolePool, 0), // another role, without rights over the others' activity
    ];
    await Promise.all(Array.from({ length: 10 }, (_, w) => writer(w, 60)));
    foreignRunning = false;
    await foreign;
    head = await new PostgresEventStore(db.pool).headPosition();
    const results = await Promise.all(followers);
    await writerRolePool.end();
    await readerRolePool.end();

    const { rows } = await db.pool.query<{ p: string }>(`SELECT tx_id || ':' || seq AS p FROM es.events ORDER BY tx_id, seq`);
    const all = rows.map((r) => r.p);
    process.stdout.write(`[review15e] ${all.length} events; writers ${JSON.stringify(used)}; reads by statement per follower ${JSON.stringify(counts)}\n`);
    expect(all.length).toBeGreaterThan(0);
    for (const got of results) expect(got).toEqual(all);
    expect(counts[1].es_read_all_own_database).toBeGreaterThan(0);
    expect(counts[3].es_read_all_own_database).toBeGreaterThan(0);
  }, 180_000);

  it('a transaction of this database given its id after the reader\'s snapshot, before its pg_stat_activity read, is not passed', async () => {
    // The own-database read takes its snapshot, then reads pg_stat_activity. Widen that gap: run its exact statement
    // (as the store prepared it) in a REPEATABLE READ transaction whose snapshot was taken before the writer began.
    const one = createPool(db.url, 1);
    try {
      const store = new PostgresEventStore(one, { pinnedHorizonMs: 0 });
      await store.readAll(START, 1);
      await store.readAll(START, 1); // now prepared on this connection: es_read_all_own_database
      const reader = await one.connect();
      const { rows: stmt } = await reader.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements WHERE name = 'es_read_all_own_database'");
      expect(stmt).toHaveLength(1);

      const foreign = await other.pool.connect(); // another database's writer, older than all: the cluster's horizon
      await foreign.query('BEGIN');
      await foreign.query('SELECT pg_current_xact_id()');
      const before = await db.pool.connect(); // one of ours, running at the snapshot
      await before.query('BEGIN');
      await insertEvent(before, 0);
      const beforeXid = BigInt((await before.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x')).rows[0].x);
      await insertEvent(db.pool, 0); // committed, above `before`
      try {
        await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        await reader.query('SELECT 1'); // the snapshot
        const late = await db.pool.connect(); // given its id after the snapshot, running when pg_stat_activity is read
        await late.query('BEGIN');
        await insertEvent(late, 0);
        const lateXid = BigInt((await late.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x')).rows[0].x);
        await before.query('COMMIT'); // finished before the activity read: unknown to it
        const { rows } = await reader.query<{ tx_id: string | null; cluster_xmin: string }>(stmt[0].statement, ['-1', '-1', 10_000]);
        await reader.query('COMMIT');
        const read = rows.filter((r) => r.tx_id !== null).map((r) => BigInt(r.tx_id!));
        expect(read.every((x) => x < beforeXid)).toBe(true); // the one running at the snapshot still holds the read
        expect(read.every((x) => x < lateXid)).toBe(true);
        await late.query('ROLLBACK');
        late.release();
      } finally {
        await foreign.query('ROLLBACK');
        foreign.release();
        before.release();
        reader.release();
      }
    } finally {
      await one.end();
    }
  });

  it('a prepared transaction of this database holds the own-database read until COMMIT PREPARED; its event comes first', async () => {
    if (!preparedAllowed) {
      process.stdout.write('[review15e] skipped: max_prepared_transactions = 0 on the test cluster (PREPARE TRANSACTION refused)\n');
      return;
    }
    const store = new PostgresEventStore(db.pool, { pinnedHorizonMs: 0 });
    const foreign = await other.pool.connect();
    await foreign.query('BEGIN');
    await foreign.query('SELECT pg_current_xact_id()');
    let at: Position = START;
    const got: string[] = [];
    const follow = async () => {
      const b = await store.readAll(at, 1000);
      for (const e of b.events) got.push(e.position);
      at = b.nextPosition;
      return b;
    };
    try {
      const p = await db.pool.connect();
      await p.query('BEGIN');
      await insertEvent(p, 1);
      const gid = `sbt-${randomUUID()}`;
      await p.query(`PREPARE TRANSACTION '${gid}'`);
      p.release();
      const prepared = (await db.pool.query<{ x: string }>('SELECT transaction::text AS x FROM pg_prepared_xacts WHERE gid = $1', [gid])).rows[0].x;
      const { rows: after } = await db.pool.query<{ p: string }>(
        "SELECT tx_id || ':' || seq AS p FROM es.events WHERE event_id = $1",
        [await insertEvent(db.pool, 2)],
      );
      for (let i = 0; i < 5; i++) {
        const b = await follow();
        expect(b.events.every((e) => BigInt(e.position.split(':')[0]) < BigInt(prepared))).toBe(true);
        await sleep(20);
      }
      await db.pool.query(`COMMIT PREPARED '${gid}'`);
      await waitUntil(async () => (await follow(), got.includes(after[0].p)), 20_000, 'the event after the prepared one');
      const preparedAt = got.findIndex((x) => x.startsWith(`${prepared}:`));
      expect(preparedAt).toBeGreaterThanOrEqual(0);
      expect(preparedAt).toBeLessThan(got.indexOf(after[0].p));
    } finally {
      await foreign.query('ROLLBACK');
      foreign.release();
    }
  });
});
