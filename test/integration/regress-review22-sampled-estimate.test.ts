import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import type { EventToAppend, Position, ReadAllBatch } from '../../src/ports/event-store';
import { START } from '../../src/ports/event-store';
import type { LogReader } from '../../src/projections/projection';
import { eventSizeEstimate, largestEventEstimate } from '../../src/projections/read-sizes';
import { RUNNER_READ_BYTES, SharedLogReader } from '../../src/workers/shared-log-reader';
import { createTestDatabase, eventLogReadable, type TestDatabase } from '../support/db';

// Regression review 22 (of 9e47a5a): the log's readers size each read by eventSizeEstimate of the largest event of
// the last, which measures an array of more than 3 items by its first, middle and last. A bulk chunk of 4 recipients
// whose second carries 1 MB of variables (a bulk of 4, one with a long text) was taken for about 300 characters: the
// runner's reads doubled up to 1,000 of them (here all 40 at once: 40 MB, 20 times RUNNER_READ_BYTES). On Postgres the
// data now comes as its JSON text, parsed by the adapter, whose length is the size (knownEventSize).

const chunk = (n: number): EventToAppend => {
  const id = randomUUID();
  const recipient = (index: number, variables: Record<string, string>) => ({ index, phone: `+5491100000${n}${index}`, variables, buttonVariables: {} });
  return {
    type: 'BulkRecipientsAdded',
    data: { bulkId: randomUUID(), companyId: 7, chunk: 0, recipients: [recipient(0, {}), recipient(1, { note: 'x'.repeat(1_000_000) }), recipient(2, {}), recipient(3, {})] },
    metadata: { eventId: id, correlationId: id, causationId: null, companyId: 7, actor: 'system', at: '2026-11-28T12:00:00.000Z', schemaVersion: 1 },
  };
};

/** The store, read through as the runner reads it, recording the events of each read. */
function recording(store: PostgresEventStore): LogReader & { reads: ReadAllBatch[] } {
  const reads: ReadAllBatch[] = [];
  return {
    reads,
    async readAll(after: Position, limit: number) {
      const batch = await store.readAll(after, limit);
      reads.push(batch);
      return batch;
    },
    headPosition: () => store.headPosition(),
    comparePositions: (a, b) => store.comparePositions(a, b),
  };
}

describe('regress-review22: reads sized by events whose large part the estimate does not sample', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    for (let n = 0; n < 40; n++) await store.append(`bulkchunk-${n}-0`, [chunk(n)], 'no_stream');
    await eventLogReadable(db.pool);
  }, 120_000);
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('the Postgres store gives each event read its size: the JSON text it was parsed from', async () => {
    const { events } = await store.readAll(START, 2);
    for (const e of events) {
      const json = JSON.stringify(e.data).length;
      expect(eventSizeEstimate(e)).toBeGreaterThanOrEqual(json);
      expect(eventSizeEstimate(e)).toBeLessThan(json * 1.1);
    }
    expect(largestEventEstimate(events)).toBeGreaterThan(1_000_000);
  });

  it('the runner reads them within about RUNNER_READ_BYTES a read', async () => {
    const log = recording(store);
    const reader = new SharedLogReader(log, 1000, 100);
    const sizing = { size: 1 };
    let from = START;
    let read = 0;
    for (;;) {
      const r = await reader.readShared(from, sizing);
      if (r.batch.events.length === 0) break;
      read += r.batch.events.length;
      from = r.batch.nextPosition;
    }
    expect(read).toBe(40);
    const largest = Math.max(...log.reads.map((b) => b.events.reduce((n, e) => n + JSON.stringify(e.data).length, 0)));
    expect(largest).toBeLessThanOrEqual(RUNNER_READ_BYTES + 1_100_000);
  });
});
