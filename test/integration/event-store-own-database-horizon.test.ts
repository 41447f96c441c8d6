import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { START, type EventToAppend } from '../../src/ports/event-store';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { waitUntil } from '../support/sends';

// The Postgres log is read below a horizon no running transaction can still append under (docs/core.md, "Reading the
// log"). A writing transaction of another database on the same server cannot append to this log: once the cluster's
// oldest running transaction stays put, the log is read below this database's own instead. One of this database
// still holds it back, so an event committed late is never skipped.

const event = (): EventToAppend => {
  const id = randomUUID();
  return {
    type: 'HorizonProbe',
    data: { id },
    metadata: { eventId: id, correlationId: id, causationId: null, companyId: null, actor: 'test', at: new Date().toISOString() },
  };
};

describe('Postgres event store: the horizon the log is read below', () => {
  let db: TestDatabase;
  let other: TestDatabase;
  const held: PoolClient[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    other = await createTestDatabase({ migrate: false });
  });
  afterEach(async () => {
    for (const c of held.splice(0)) {
      await c.query('ROLLBACK').catch(() => undefined);
      c.release();
    }
  });
  afterAll(async () => {
    await other?.drop();
    await db?.drop();
  });

  /** A transaction that has a transaction id (as any write has), left open; its id. */
  async function openWritingTransaction(on: TestDatabase): Promise<{ client: PoolClient; xid: bigint }> {
    const client = await on.pool.connect();
    held.push(client);
    await client.query('BEGIN');
    const { rows } = await client.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
    return { client, xid: BigInt(rows[0].xid) };
  }

  const readAllIds = async (store: PostgresEventStore): Promise<string[]> =>
    (await store.readAll(START, 10_000)).events.map((e) => (e.data as { id: string }).id);

  it('a writing transaction left open in another database stops holding the log back', async () => {
    const store = new PostgresEventStore(db.pool);
    const foreign = await openWritingTransaction(other);
    const appended = event();
    const { position } = await store.append(`probe-${randomUUID()}`, [appended], 'no_stream');
    expect(BigInt(position.split(':')[0])).toBeGreaterThan(foreign.xid); // the cluster-wide horizon is behind it

    // before 2026-11-28 every read stopped below the other database's transaction for as long as it stayed open
    await waitUntil(async () => (await readAllIds(store)).includes((appended.data as { id: string }).id), 20_000, 'the event readable');
    const open = await other.pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1 AND state = 'idle in transaction'",
      [(await foreign.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid],
    );
    expect(open.rows[0].n).toBe('1'); // it was still open all along
  });

  it.each([
    ['the cluster-wide read', 60_000, false],
    ['the own-database read, another database\'s transaction open too', 0, true],
  ])('a writing transaction of this database still holds the log back (%s): an event it commits late comes first, never skipped', async (_, pinnedHorizonMs, foreignOpen) => {
    const store = new PostgresEventStore(db.pool, { pinnedHorizonMs });
    if (foreignOpen) await openWritingTransaction(other); // the cluster's oldest running transaction: another database's
    await store.readAll(START, 1); // the store has seen the cluster's horizon once
    const late = await openWritingTransaction(db);
    const lateEvent = event();
    const before = event();
    await store.append(`probe-${randomUUID()}`, [before], 'no_stream');

    for (let i = 0; i < 5; i++) expect(await readAllIds(store)).not.toContain((before.data as { id: string }).id);

    await late.client.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ($1, 0, $2, $3, $4, $5)`,
      [`probe-${randomUUID()}`, lateEvent.metadata.eventId, lateEvent.type, lateEvent.data, lateEvent.metadata],
    );
    await late.client.query('COMMIT');
    held.splice(held.indexOf(late.client), 1);
    late.client.release();

    const ids = await waitUntil(async () => {
      const got = await readAllIds(store);
      return got.includes((before.data as { id: string }).id) ? got : undefined;
    }, 20_000, 'both events readable');
    const lateAt = ids.indexOf((lateEvent.data as { id: string }).id);
    expect(lateAt).toBeGreaterThanOrEqual(0);
    expect(lateAt).toBeLessThan(ids.indexOf((before.data as { id: string }).id));
  });
});
