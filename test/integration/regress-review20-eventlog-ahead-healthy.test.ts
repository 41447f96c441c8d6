import { Client } from 'pg';
import { eventLogAheadOfServer, PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Regression review 20 of 19749ea: the start-up check that the event log is not ahead of the server's transaction
// counter must never trip on the server that wrote the log, whatever wrote it: appends in subtransactions (a
// savepoint's event takes its top transaction's id), a prepared transaction committed later (its id was assigned
// before others that committed first), a transaction still open with a newer id, and a second database of the same
// cluster writing its own log (one counter for the cluster). A log restored ahead still trips it (the guard's guard).

const event = (type: string) => ({
  type,
  data: {},
  metadata: { eventId: crypto.randomUUID(), correlationId: 'c', causationId: null, companyId: 1, actor: 'test', at: new Date(0).toISOString() },
});

describe('regression review 20: eventLogAheadOfServer on a healthy server', () => {
  let db: TestDatabase;
  let other: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    other = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
    await other?.drop();
  });

  it('does not trip after appends in savepoints, a late prepared commit, an open newer transaction and another database', async () => {
    const store = new PostgresEventStore(db.pool);
    await store.append('healthy-1', [event('A')], 'no_stream');
    expect(await eventLogAheadOfServer(db.pool)).toBeUndefined();

    // an event appended in a subtransaction
    const c = new Client({ connectionString: db.url });
    await c.connect();
    try {
      await c.query('BEGIN');
      await c.query('SAVEPOINT s1');
      await c.query(`INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ('healthy-sub', 0, gen_random_uuid(), 'Sub', '{}', '{}')`);
      await c.query('RELEASE SAVEPOINT s1');
      await c.query('COMMIT');
    } finally {
      await c.end();
    }
    expect(await eventLogAheadOfServer(db.pool)).toBeUndefined();

    // a transaction with an assigned id left open while newer ones commit, then committed
    const open = new Client({ connectionString: db.url });
    await open.connect();
    try {
      await open.query('BEGIN');
      await open.query(`INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ('healthy-open', 0, gen_random_uuid(), 'Open', '{}', '{}')`);
      await store.append('healthy-2', [event('B')], 'no_stream');
      expect(await eventLogAheadOfServer(db.pool)).toBeUndefined();
      await open.query('COMMIT');
    } finally {
      await open.end();
    }
    expect(await eventLogAheadOfServer(db.pool)).toBeUndefined();

    // a prepared transaction (where the server allows them), committed after newer ones
    const { rows } = await db.pool.query<{ max_prepared_transactions: string }>('SHOW max_prepared_transactions');
    if (Number(rows[0].max_prepared_transactions) > 0) {
      const p = new Client({ connectionString: db.url });
      await p.connect();
      try {
        await p.query('BEGIN');
        await p.query(`INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ('healthy-prepared', 0, gen_random_uuid(), 'Prepared', '{}', '{}')`);
        await p.query(`PREPARE TRANSACTION 'regress-review20'`);
        await store.append('healthy-3', [event('C')], 'no_stream');
        await p.query(`COMMIT PREPARED 'regress-review20'`);
      } finally {
        await p.end();
      }
      expect(await eventLogAheadOfServer(db.pool)).toBeUndefined();
    } else {
      console.log('regress-review20: prepared transactions not tested: max_prepared_transactions is 0 on this server');
    }

    // another database of the cluster spends transaction ids; both logs stay behind the cluster's counter
    const otherStore = new PostgresEventStore(other.pool);
    for (let i = 0; i < 20; i++) await otherStore.append(`other-${i}`, [event('D')], 'no_stream');
    expect(await eventLogAheadOfServer(db.pool)).toBeUndefined();
    expect(await eventLogAheadOfServer(other.pool)).toBeUndefined();

    // a row written ahead of the counter (as a restore from a server ahead writes it) trips it
    await db.pool.query(
      `INSERT INTO es.events (tx_id, stream_id, stream_revision, event_id, type, data, metadata)
       VALUES (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000, 'restored', 0, gen_random_uuid(), 'R', '{}', '{}')`);
    expect(await eventLogAheadOfServer(db.pool)).toEqual({ newestTxId: expect.any(String), nextTxId: expect.any(String) });
  });
});
