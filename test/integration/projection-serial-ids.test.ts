import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { START, type EventToAppend } from '../../src/ports/event-store';
import { bulkProjection } from '../../src/projections/bulk/projection';
import { applyHandled, type Projection } from '../../src/projections/projection';
import { rebuildProjection } from '../../src/projections/rebuild';
import { sendsProjection } from '../../src/projections/sends/projection';
import { withTransaction } from '../../src/shared/tx';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// The integer ids clients keep (a single send's status record, `rm_sends.sends.id`; a bulk message item,
// `rm_bulk.messages.id`) must be the same after a rebuild: a batch rolled back after its inserts (a failure, a
// crash) and a redelivered batch must leave no gap in the live ids, since a rebuild numbers without them
// (docs/sends.md "Status record", docs/bulk.md). They were `bigserial` defaults: a rolled-back transaction does
// not give its sequence values back, so live ids were 4,5,6 where a rebuild gave 1,2,3.

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

describe('projection serial ids: the same after a failed batch, a redelivered batch and a rebuild', () => {
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
});
