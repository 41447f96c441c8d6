import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { START } from '../../src/ports/event-store';
import { createEventRegistry } from '../../src/events/catalogue';
import { ValidatingEventStore } from '../../src/events/validating-store';
import { knownEventSizeOf } from '../../src/shared/event-sizes';
import { createTestDatabase, eventLogReadable, type TestDatabase } from '../support/db';

// Regression review 23b of ed3ef8c (guard, found sound): readAll now reads `data::text` and parses it itself, where
// pg parsed the jsonb column (pg-types registers JSON.parse for oid 3802, on the same text jsonb's output gives). So
// the data equals what pg's parser gives (readStream still reads it so), whatever jsonb did to its numbers (`1.0`
// keeps its scale, `1e2` is written `100`, an integer past 2^53 loses the same digits both ways), and its size is the
// text's length. The validating store passes an event it does not upcast as the same object: the size stays known.

describe('regress-review23b: data read as jsonb text equals pg parsing it', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  const stream = `contact-7-${Math.floor(Math.random() * 1e6)}`;
  const raw = '{"n1": 1.0, "n2": 1e2, "n3": 12345678901234567890, "n4": -0, "n5": 1.5e-7, "n6": 0.1000, "n7": 1E+400, ' +
    '"s": "é \\u00e9 \\ud83d\\ude00 \\"q\\" \\\\ \\n", "a": [1, [2.50, {"z": null}]], "t": true}';

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    const id = randomUUID();
    await store.append(stream, [{ type: 'Unregistered', data: { x: 1 }, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 7, actor: 'system', at: '2026-11-28T12:00:00.000Z', schemaVersion: 1 } }], 'no_stream');
    await db.pool.query('UPDATE es.events SET data = $1::jsonb WHERE stream_id = $2', [raw, stream]);
    await eventLogReadable(db.pool);
  }, 120_000);
  afterAll(async () => db?.drop());

  it('readAll gives the data readStream (pg-types) gives, and the text length as its size', async () => {
    const [viaPg] = await store.readStream(stream);
    const { events } = await store.readAll(START, 10);
    const e = events.find((x) => x.streamId === stream)!;
    expect(e.data).toEqual(viaPg.data);
    expect(Object.is((e.data as any).n4, (viaPg.data as any).n4)).toBe(true);
    expect((e.data as any).n3).toBe(12345678901234567000);
    expect((e.data as any).n7).toBe(Infinity); // jsonb keeps the numeric; JSON.parse gives Infinity both ways
    // in UTF-16 code units, as JavaScript measures strings (Postgres's length() counts the emoji once)
    const { rows: [{ text }] } = await db.pool.query('SELECT data::text AS text FROM es.events WHERE stream_id = $1', [stream]);
    expect(knownEventSizeOf(e)).toBe(text.length);
  });

  it('the validating store keeps the size of an event it passes as read', async () => {
    const validating = new ValidatingEventStore(store, createEventRegistry());
    const { events } = await validating.readAll(START, 10);
    const e = events.find((x) => x.streamId === stream)!;
    expect(knownEventSizeOf(e)).toBeGreaterThan(100);
  });
});
