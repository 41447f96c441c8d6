import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { START, type EventToAppend, type RecordedEvent } from '../../src/ports/event-store';
import { bulkProjection } from '../../src/projections/bulk/projection';
import { applyHandled, type Projection } from '../../src/projections/projection';
import { rebuildProjection } from '../../src/projections/rebuild';
import { sendsProjection } from '../../src/projections/sends/projection';
import { readCheckpoint } from '../../src/projections/store';
import { withTransaction } from '../../src/shared/tx';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// The integer ids clients keep (a single send's status record, `rm_sends.sends.id`; a bulk message item,
// `rm_bulk.messages.id`) must be the same after a rebuild: a batch rolled back after its inserts (a failure, a
// crash) and a redelivered batch must leave no gap in the live ids, since a rebuild numbers without them
// (docs/core.md, "Projections"). They were drawn from the `bigserial` default: a rolled-back transaction does not
// give its sequence values back, so live ids were 4,5,6 where a rebuild gave 1,2,3. A process of the earlier
// version beside the new one still draws from that sequence: it must never collide with an assigned id.

const AT = '2026-01-01T00:00:00.000Z';
const ev = (type: string, data: unknown, companyId = 1): EventToAppend => {
  const id = randomUUID();
  return { type, data, metadata: { eventId: id, correlationId: id, causationId: null, companyId, actor: 'test', at: AT } };
};
const requested = (sendId: string) => ev('TemplateSendRequested', {
  sendId, companyId: 1, numberId: 1, phoneNumberId: 'p1', templateId: 1, templateName: 't', language: 'es', category: 'UTILITY',
  recipientPhone: '+5491100000000', recipientE164: '+5491100000000', variables: {}, buttonVariables: {}, requestedAt: AT,
});
const accepted = (sendId: string) => ev('TemplateSendAccepted', {
  sendId, companyId: 1, numberId: 1, recipientE164: '+5491100000000', providerMessageId: `wamid.${sendId}`, acceptedAt: AT });
const recipientsAdded = (bulkId: string, chunk: number, from: number, n: number) => ev('BulkRecipientsAdded', {
  bulkId, companyId: 1, chunk,
  recipients: Array.from({ length: n }, (_, i) => ({ index: from + i, phone: `+54911000${String(from + i).padStart(5, '0')}`, variables: {}, buttonVariables: {} })),
});

/** `p`, whose first `failures` batches throw after applying (their statements ran, then the transaction rolls back). */
const failingAfterApply = (p: Projection, failures: number): Projection => {
  let left = failures;
  return {
    ...p,
    async applyBatch(tx, events) {
      await applyHandled(p, tx, events);
      if (left > 0) {
        left -= 1;
        throw new Error('injected failure after apply');
      }
    },
  };
};

/**
 * `p` as a process of the earlier version applies it: new rows take their id from the column's default (the
 * sequence), as the inserts did before ids were assigned by the projection (the same statements otherwise).
 */
const earlierVersion = (p: Projection, insert: string, params: (e: RecordedEvent) => unknown[], type: string): Projection => ({
  ...p,
  applyBatch: undefined,
  async apply(tx, e) {
    if (e.type === type) await tx.query(insert, params(e));
    else await p.apply(tx, e);
  },
});
const earlierSends = earlierVersion(
  sendsProjection,
  `INSERT INTO sends (send_id, company_id, number_id, phone_number_id, template_id, template_name, language, category,
                      recipient_phone, recipient_e164, variables, button_variables, requested_at)
   SELECT $1, 1, 1, 'p1', 1, 't', 'es', 'UTILITY', '+5491100000000', '+5491100000000', '{}', '{}', $2
    WHERE NOT EXISTS (SELECT 1 FROM sends WHERE send_id = $1)`,
  (e) => [(e.data as { sendId: string }).sendId, AT],
  'TemplateSendRequested',
);
const earlierBulk = earlierVersion(
  bulkProjection,
  `INSERT INTO messages (bulk_id, chunk, idx, recipient_phone, variables)
   SELECT $1, $2, r.idx, r.phone, r.variables
     FROM jsonb_to_recordset($3::jsonb) AS r(idx integer, phone text, variables jsonb)
    WHERE NOT EXISTS (SELECT 1 FROM messages WHERE bulk_id = $1 AND idx = $4)
    ORDER BY r.idx`,
  (e) => {
    const d = e.data as { bulkId: string; chunk: number; recipients: Array<{ index: number; phone: string; variables: unknown }> };
    return [d.bulkId, d.chunk, JSON.stringify(d.recipients.map((r) => ({ idx: r.index, phone: r.phone, variables: r.variables }))), d.recipients[0].index];
  },
  'BulkRecipientsAdded',
);

describe('status record and bulk message ids: the same after a failed batch, a redelivered batch and a rebuild', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  beforeEach(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  const idsOf = async (p: Projection, keyOf: string, schema = p.schema): Promise<Array<{ key: string; id: string }>> =>
    (await db.pool.query(`SELECT ${keyOf} AS key, id::text AS id FROM ${schema}.${p === sendsProjection ? 'sends' : 'messages'} ORDER BY id`)).rows;

  /**
   * Waits until `readAll` returns the log's first `n` events: a transaction open elsewhere on the cluster (another
   * test file) holds it back, and a batch that reads nothing cannot fail.
   */
  const readable = async (n: number) => {
    while ((await store.readAll(START, n)).events.length < n) await new Promise((r) => setTimeout(r, 5));
  };

  /** Applies the whole log again to the live schema, in one transaction, as a redelivered batch would be. */
  const redeliverAll = async (p: Projection) => {
    const events = (await store.readAll(START, 100_000)).events;
    await withTransaction(db.pool, async (tx) => {
      await tx.query(`SET LOCAL search_path TO ${p.schema}, public`);
      await applyHandled(p, tx, events);
    });
  };

  /** Rebuilds into `<schema>__next` (batches of `batchSize`) and returns the ids the rebuild assigned. */
  const rebuiltIds = async (p: Projection, keyOf: string, batchSize?: number) => {
    await rebuildProjection(db.pool, store, p, { batchSize });
    return idsOf(p, keyOf);
  };

  it('sends: a batch failing after apply is retried, then a rebuild: ids 1.. with no gap, the same after the rebuild', async () => {
    for (const s of ['s1', 's2', 's3']) await store.append(`send-${s}`, [requested(s)], 'no_stream');
    const crashing = failingAfterApply(sendsProjection, 2);
    const runner = new ProjectionRunner(db.pool, store, [crashing]);
    await runner.prepare();
    await readable(3);
    await expect(runner.runBatch(crashing)).rejects.toThrow('injected');
    await expect(runner.runBatch(crashing)).rejects.toThrow('injected');
    await runner.catchUp();
    // a later batch: a new request answered in the same batch, and an answer to an earlier one
    await store.append('send-s4', [requested('s4'), accepted('s4')], 'no_stream');
    await store.append('send-s2', [accepted('s2')], 0n);
    await runner.catchUp();
    const live = await idsOf(sendsProjection, 'send_id');
    expect(live).toEqual([{ key: 's1', id: '1' }, { key: 's2', id: '2' }, { key: 's3', id: '3' }, { key: 's4', id: '4' }]);
    expect(await rebuiltIds(sendsProjection, 'send_id')).toEqual(live);
    expect(await rebuiltIds(sendsProjection, 'send_id', 2)).toEqual(live); // other batch boundaries, same ids
  });

  it('sends: a redelivered batch draws no id; new requests continue after the highest id', async () => {
    const runner = new ProjectionRunner(db.pool, store, [sendsProjection]);
    await runner.prepare();
    for (const s of ['s1', 's2']) await store.append(`send-${s}`, [requested(s), accepted(s)], 'no_stream');
    await runner.catchUp();
    await redeliverAll(sendsProjection);
    await redeliverAll(sendsProjection);
    for (const s of ['s3', 's4']) await store.append(`send-${s}`, [requested(s)], 'no_stream');
    await runner.catchUp();
    const live = await idsOf(sendsProjection, 'send_id');
    expect(live).toEqual([{ key: 's1', id: '1' }, { key: 's2', id: '2' }, { key: 's3', id: '3' }, { key: 's4', id: '4' }]);
    expect(await rebuiltIds(sendsProjection, 'send_id')).toEqual(live);
  });

  it('bulk: a chunk batch failing after apply is retried, then a rebuild: the same message ids', async () => {
    const [b1, b2] = [randomUUID(), randomUUID()];
    await store.append(`bulkchunk-${b1}-0`, [recipientsAdded(b1, 0, 0, 3)], 'no_stream');
    await store.append(`bulkchunk-${b1}-1`, [recipientsAdded(b1, 1, 3, 2)], 'no_stream');
    const crashing = failingAfterApply(bulkProjection, 1);
    const runner = new ProjectionRunner(db.pool, store, [crashing]);
    await runner.prepare();
    await readable(2);
    await expect(runner.runBatch(crashing)).rejects.toThrow('injected');
    await runner.catchUp();
    await store.append(`bulkchunk-${b2}-0`, [recipientsAdded(b2, 0, 0, 2)], 'no_stream');
    await runner.catchUp();
    const live = await idsOf(bulkProjection, `bulk_id::text || ':' || idx`);
    expect(live.map((r) => r.id)).toEqual(['1', '2', '3', '4', '5', '6', '7']);
    expect(live.map((r) => r.key)).toEqual([...[0, 1, 2, 3, 4].map((i) => `${b1}:${i}`), `${b2}:0`, `${b2}:1`]);
    expect(await rebuiltIds(bulkProjection, `bulk_id::text || ':' || idx`)).toEqual(live);
    expect(await rebuiltIds(bulkProjection, `bulk_id::text || ':' || idx`, 1)).toEqual(live);
  });

  it('bulk: a redelivered chunk draws no id; the next chunk continues after the highest id', async () => {
    const b1 = randomUUID();
    const runner = new ProjectionRunner(db.pool, store, [bulkProjection]);
    await runner.prepare();
    await store.append(`bulkchunk-${b1}-0`, [recipientsAdded(b1, 0, 0, 3)], 'no_stream');
    await runner.catchUp();
    await redeliverAll(bulkProjection);
    await store.append(`bulkchunk-${b1}-1`, [recipientsAdded(b1, 1, 3, 2)], 'no_stream');
    await runner.catchUp();
    const live = await idsOf(bulkProjection, `bulk_id::text || ':' || idx`);
    expect(live.map((r) => r.id)).toEqual(['1', '2', '3', '4', '5']);
    expect(await rebuiltIds(bulkProjection, `bulk_id::text || ':' || idx`)).toEqual(live);
  });
  it('sends: a process of the earlier version between two of this one draws above every assigned id, never the same', async () => {
    const runner = new ProjectionRunner(db.pool, store, [sendsProjection]);
    const earlier = new ProjectionRunner(db.pool, store, [earlierSends]);
    await runner.prepare();
    for (const s of ['s1', 's2']) await store.append(`send-${s}`, [requested(s), accepted(s)], 'no_stream');
    await runner.catchUp();
    await store.append('send-s3', [requested('s3')], 'no_stream');
    await earlier.catchUp();
    await store.append('send-s4', [requested('s4')], 'no_stream');
    await runner.catchUp();
    await store.append('send-s5', [requested('s5')], 'no_stream');
    await earlier.catchUp();
    const live = await idsOf(sendsProjection, 'send_id');
    expect(live).toEqual(['s1', 's2', 's3', 's4', 's5'].map((key, i) => ({ key, id: String(i + 1) })));
    expect(await readCheckpoint(db.pool, 'sends')).toMatchObject({ state: 'running', error: null });
    expect(await rebuiltIds(sendsProjection, 'send_id')).toEqual(live);
  });

  it('bulk: a process of the earlier version between two of this one draws above every assigned id, never the same', async () => {
    const b1 = randomUUID();
    const runner = new ProjectionRunner(db.pool, store, [bulkProjection]);
    const earlier = new ProjectionRunner(db.pool, store, [earlierBulk]);
    await runner.prepare();
    await store.append(`bulkchunk-${b1}-0`, [recipientsAdded(b1, 0, 0, 3)], 'no_stream');
    await runner.catchUp();
    await store.append(`bulkchunk-${b1}-1`, [recipientsAdded(b1, 1, 3, 2)], 'no_stream');
    await earlier.catchUp();
    await store.append(`bulkchunk-${b1}-2`, [recipientsAdded(b1, 2, 5, 2)], 'no_stream');
    await runner.catchUp();
    await store.append(`bulkchunk-${b1}-3`, [recipientsAdded(b1, 3, 7, 1)], 'no_stream');
    await earlier.catchUp();
    const live = await idsOf(bulkProjection, `bulk_id::text || ':' || idx`);
    expect(live).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ key: `${b1}:${i}`, id: String(i + 1) })));
    expect(await readCheckpoint(db.pool, 'bulk')).toMatchObject({ state: 'running', error: null });
    expect(await rebuiltIds(bulkProjection, `bulk_id::text || ':' || idx`)).toEqual(live);
  });
});
