import { seedFixture } from '../../src/commands/provisioning/seed';
import { CHUNK_MAX_BYTES, chunkStarts } from '../../src/commands/bulk/chunks';
import { BULK_CO, bulkFixture, phones } from '../support/bulk';
import { createTestApp } from '../support/services';

// A bulk's chunk events are bounded in bytes as well as in recipients (src/commands/bulk/chunks.ts): EventStoreDB
// refuses a write over 1 MiB by default, and 1,000 recipients with long variables made one (review 16d).

describe('chunkStarts', () => {
  it('cuts at the count, and before the recipient that would pass the bytes; a larger one goes alone', () => {
    expect(chunkStarts([], 3, 100)).toEqual([]);
    expect(chunkStarts([1, 1, 1, 1, 1, 1, 1], 3, 100)).toEqual([0, 3, 6]);
    expect(chunkStarts([40, 40, 40, 10, 10], 10, 100)).toEqual([0, 2]);
    expect(chunkStarts([10, 500, 10, 10], 10, 100)).toEqual([0, 1, 2]);
    expect(chunkStarts([100, 1], 10, 100)).toEqual([0, 1]);
  });
});

describe('send-bulk with long variables', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2026-03-01T10:00:00.000Z') });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('appends chunks of at most 256 KiB of recipients, every recipient once and in order', async () => {
    const long = 'x'.repeat(700);
    const recipients = phones(1_200, '+5491176').map((phone, i) => ({ phone, variables: { name: `${long} ${i}` }, button_variables: { button_0: `A${i}` } }));
    const res = await t.app.inject({
      method: 'POST', url: '/api/v1/platform-templates/send-bulk/', headers: { 'x-api-key': BULK_CO.key },
      payload: { phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'order_update', recipients },
    });
    expect(res.statusCode).toBe(202);
    const bulkId = res.json().bulk_send_id as string;
    const chunks = (await t.db.pool.query<{ stream_id: string; bytes: number; chunk: number; indexes: number[] }>(
      `SELECT stream_id, octet_length(data::text) AS bytes, (data->>'chunk')::int AS chunk,
              ARRAY(SELECT (r->>'index')::int FROM jsonb_array_elements(data->'recipients') r) AS indexes
         FROM es.events WHERE type = 'BulkRecipientsAdded' AND stream_id LIKE $1 ORDER BY (data->>'chunk')::int`,
      [`bulkchunk-${bulkId}-%`],
    )).rows;
    // 1,200 recipients of about 760 bytes: over 900 KB, in 1,000-recipient chunks until 2026-11-28 (one of 760 KB)
    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.map((c) => c.stream_id)).toEqual(chunks.map((_, n) => `bulkchunk-${bulkId}-${n}`));
    for (const c of chunks) expect(c.bytes).toBeLessThanOrEqual(CHUNK_MAX_BYTES + 64 * 1024); // the event's own fields beside the recipients
    expect(chunks.flatMap((c) => c.indexes)).toEqual(recipients.map((_, i) => i));
    const created = await t.db.pool.query(`SELECT (data->>'chunkCount')::int AS n FROM es.events WHERE stream_id = $1 AND type = 'BulkSendCreated'`, [`bulk-${bulkId}`]);
    expect(created.rows[0].n).toBe(chunks.length);
  });
});
