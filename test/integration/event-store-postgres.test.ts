import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createTestDatabase } from '../support/db';
import { describeEventStoreContract } from './event-store-contract';

describeEventStoreContract('postgres', async () => {
  const db = await createTestDatabase({ poolSize: 12 });
  const store = new PostgresEventStore(db.pool);
  return {
    store,
    cleanup: async () => {
      await store.close();
      await db.drop();
    },
  };
});

describe('postgres event store: late commits', () => {
  it('does not let readAll pass an event whose transaction commits after a later one', async () => {
    const db = await createTestDatabase();
    const store = new PostgresEventStore(db.pool);
    try {
      const slow = await db.pool.connect();
      await slow.query('BEGIN');
      // The slow transaction takes its sequence value (and transaction id) first, then commits last.
      await slow.query(
        `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
         VALUES ('late-1', 0, gen_random_uuid(), 'Late', '{}', '{"eventId":"x"}')`,
      );
      await store.append('fast-1', [{ type: 'Fast', data: {}, metadata: { eventId: '00000000-0000-4000-8000-000000000001', correlationId: 'c', causationId: null, companyId: null, actor: 'test', at: '1970-01-01T00:00:00.000Z' } }], 'no_stream');
      const before = await store.readAll('' as never, 100);
      expect(before.events.map((e) => e.type)).toEqual([]); // the fast one waits behind the open transaction
      await slow.query('COMMIT');
      slow.release();
      // Other test files share this server, and their open transactions may hold readers back a moment too.
      let after = await store.readAll(before.nextPosition, 100);
      for (let i = 0; i < 2000 && after.events.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 5));
        after = await store.readAll(before.nextPosition, 100);
      }
      expect(after.events.map((e) => e.type)).toEqual(['Late', 'Fast']);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
