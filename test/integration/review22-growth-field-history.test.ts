import { upsertContact } from '../../src/commands/contact/handler';
import { parseUpsertBody } from '../../src/commands/contact/upsert-input';
import { START, type RecordedEvent } from '../../src/ports/event-store';
import { contactsProjection, FIELD_HISTORY_KEPT } from '../../src/projections/contacts/projection';
import { getFieldHistory } from '../../src/projections/contacts/queries';
import { checksumProjection, rebuildProjection } from '../../src/projections/rebuild';
import { chunksOf, fillProjection } from '../support/projections';
import { createTestContext } from '../support/services';
import { provisionAll, settle, testClock } from './contacts-support';

// Review 22 (growth after a year, docs/growth.md; docs/contacts.md, "Field history"): rm_contacts.field_history kept
// every custom-field version for good (about 10 GB a year at 200,000 changes a day) and no route reads it; the whole
// history is the event log's. It now keeps the last FIELD_HISTORY_KEPT (10) versions of each field. What it keeps
// depends on the events alone: one event at a time, in batches of every size, redelivered, live or rebuilt, the
// same rows.

describe('contacts read model: the field history keeps the last versions of each field', () => {
  let t: Awaited<ReturnType<typeof createTestContext>>;
  let log: RecordedEvent[];
  let ana: number;
  let leo: number;
  const clock = testClock('2026-03-01T12:00:00.000Z');

  beforeAll(async () => {
    t = await createTestContext({ now: clock.now });
    await provisionAll(t.services);
    const up = async (body: object) => (await upsertContact(t.services, 101, parseUpsertBody(body), { actor: 'key_a', companyId: 101 })).contact.contactId;
    // 'visits' (field 502) of Ana changes 25 times, the last one clearing it; her 'plan' (501) 3 times; Leo's visits 12 times
    for (let i = 1; i <= 24; i++) {
      ana = await up({ phone: '+5491162000001', custom_fields: [{ key: 'visits', value: [i] }, ...(i <= 3 ? [{ key: 'plan', value: [i % 2 ? 'gold' : 'basic'] }] : [])] });
      clock.advance(1000);
    }
    await up({ phone: '+5491162000001', custom_fields: [{ key: 'visits', value: [] }] });
    for (let i = 1; i <= 12; i++) {
      leo = await up({ phone: '+5491162000002', custom_fields: [{ key: 'visits', value: [100 + i] }] });
      clock.advance(1000);
    }
    await settle(t.services);
    log = (await t.services.store.readAll(START, 100_000)).events;
  }, 120_000);
  afterAll(() => t?.close());

  it('keeps the last 10 versions of each field, the current one included; fewer are all kept', async () => {
    expect(FIELD_HISTORY_KEPT).toBe(10);
    const versions = async (contactId: number, fieldId: number) =>
      (await getFieldHistory(t.services.pool, 101, contactId, fieldId)).map((h) => [h.version, h.value]);
    expect(await versions(ana, 502)).toEqual([
      ...Array.from({ length: 9 }, (_, i) => [16 + i, [16 + i]]), // 16 .. 24
      [25, null], // cleared: a version too
    ]);
    expect(await versions(ana, 501)).toEqual([[1, ['gold']], [2, ['basic']], [3, ['gold']]]);
    expect(await versions(leo, 502)).toEqual(Array.from({ length: 10 }, (_, i) => [3 + i, [103 + i]]));
    const { rows } = await t.services.pool.query('SELECT version FROM rm_contacts.field_values WHERE company_id = 101 AND contact_id = $1 AND field_id = 502', [ana]);
    expect(rows).toEqual([{ version: 25 }]);
  });

  it('one event at a time, in batches of every size, redelivered, and rebuilt: the same rows', async () => {
    const p = contactsProjection;
    const live = await checksumProjection(t.services.pool, p);
    const oneByOne = { ...p, applyBatch: undefined };
    await fillProjection(t.services.pool, oneByOne, 'rm_contacts__one', chunksOf(log, 1));
    expect(await checksumProjection(t.services.pool, p, 'rm_contacts__one')).toBe(live);
    // the whole log again on top, one by one: the trimmed versions are not inserted again
    await fillProjection(t.services.pool, oneByOne, 'rm_contacts__one', [...chunksOf(log, 1)]);
    expect(await checksumProjection(t.services.pool, p, 'rm_contacts__one')).toBe(live);
    for (const size of [log.length, 2, 3, 7, 13]) {
      const batches = chunksOf(log, size);
      batches.splice(Math.floor(batches.length / 2), 0, batches[Math.floor(batches.length / 3)]); // one batch again, later
      await fillProjection(t.services.pool, p, 'rm_contacts__batch', [...batches, log]);
      expect([size, await checksumProjection(t.services.pool, p, 'rm_contacts__batch')]).toEqual([size, live]);
    }
    await fillProjection(t.services.pool, p, 'rm_contacts__batch', [log.flatMap((e) => [e, e])]); // each event twice in one batch
    expect(await checksumProjection(t.services.pool, p, 'rm_contacts__batch')).toBe(live);
    await rebuildProjection(t.services.pool, t.services.store, p, {});
    expect(await checksumProjection(t.services.pool, p)).toBe(live);
  });

  it('trims what an earlier version kept once the field changes again, and a rebuild trims every field', async () => {
    // as an upgraded database has it: every version kept by the code before review 22
    const pool = t.services.pool;
    const canonical = await checksumProjection(pool, contactsProjection);
    await pool.query(
      `INSERT INTO rm_contacts.field_history (company_id, contact_id, field_id, version, value, expires_at, set_at, actor)
       SELECT 101, c, 502, v, jsonb_build_array(v), NULL, now(), 'old' FROM (VALUES ($1::int, 15), ($2::int, 2)) x(c, top), generate_series(1, x.top) v
       ON CONFLICT DO NOTHING`, [ana, leo]);
    const count = async (contactId: number) =>
      Number((await pool.query('SELECT count(*) FROM rm_contacts.field_history WHERE contact_id = $1 AND field_id = 502', [contactId])).rows[0].count);
    expect([await count(ana), await count(leo)]).toEqual([25, 12]);
    await upsertContact(t.services, 101, parseUpsertBody({ phone: '+5491162000002', custom_fields: [{ key: 'visits', value: [200] }] }), { actor: 'key_a', companyId: 101 });
    await settle(t.services);
    expect([await count(ana), await count(leo)]).toEqual([25, 10]); // Leo's changed: trimmed; Ana's waits
    await rebuildProjection(pool, t.services.store, contactsProjection, {});
    expect([await count(ana), await count(leo)]).toEqual([10, 10]);
    expect(await checksumProjection(pool, contactsProjection)).not.toBe(canonical); // Leo's 13th version is new
  });
});
