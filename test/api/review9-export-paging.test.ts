import { createTestApp } from '../support/services';
import { anonymizeId } from '../../src/shared/anonymize';
import { TEST_ANON_SECRET } from '../support/services';
import { issueKey, messageRecord, ndjson, provisionCompany, recordMessages, settle } from '../support/conversation-fixtures';

// Review 9 of the export's paging: rows that tie on occurred_at, within and across companies, with message ids
// whose byte order differs from a linguistic order, are each returned exactly once, in order, whatever the page size.

const GLOBAL = 'sbk_global_review9paging00000000000000';
const PATH = '/api/v1/qualitative-export/messages';
const AT = '2024-03-05T08:00:00.000Z';
const IDS = ['a', 'B', 'é', 'Z', '_x', 'a-1', 'a_1', 'A', 'ñ', '10', '9'];

describe('review 9: export paging over ties', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp();
    for (const companyId of [941, 942]) await provisionCompany(t.services, { companyId });
    await issueKey(t.services, GLOBAL, null);
    await settle(t.services);
    const records = [941, 942].flatMap((companyId) =>
      IDS.map((id) => messageRecord({ companyId, id, conversationId: `conv-${id}`, occurredAt: AT })));
    records.push(messageRecord({ companyId: 941, id: 'later', conversationId: 'c', occurredAt: '2024-03-05T08:00:00.001Z' }));
    records.push(messageRecord({ companyId: 942, id: 'earlier', conversationId: 'c', occurredAt: '2024-03-05T07:59:59.999Z' }));
    const outcomes = await recordMessages(t.services, records);
    expect(outcomes.every((o) => o.status === 'recorded')).toBe(true);
    await settle(t.services);
  });
  afterAll(() => t.close());

  async function all(query: Record<string, string>): Promise<string[]> {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const res = await t.app.inject({ method: 'GET', url: PATH, query: { ...query, ...(cursor ? { cursor } : {}) }, headers: { 'x-api-key': GLOBAL } });
      expect(res.statusCode).toBe(200);
      const lines = ndjson(res.body);
      const last = lines.at(-1);
      cursor = last && '_truncated' in last ? last.next_cursor : undefined;
      for (const l of cursor ? lines.slice(0, -1) : lines) seen.push(l.message_id);
      if (!cursor) return seen;
    }
    throw new Error('too many pages');
  }

  it('every row exactly once, in (occurred_at, company, message id bytes) order, for every page size', async () => {
    const byteOrder = [...IDS].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    const m = (c: number, id: string) => anonymizeId(TEST_ANON_SECRET, c, 'message', id);
    const expected = [m(942, 'earlier'), ...byteOrder.map((id) => m(941, id)), ...byteOrder.map((id) => m(942, id)), m(941, 'later')];
    const base = { company_id: '941,942', from: '2024-03-01', to: '2024-03-10' };
    for (const limit of [1, 2, 3, 5, 11, 12, 25]) expect(await all({ ...base, limit: String(limit) })).toEqual(expected);
    // one company at a time: the same order within it
    expect(await all({ ...base, company_id: '942', limit: '2' })).toEqual(expected.filter((id) => [m(942, 'earlier'), ...byteOrder.map((x) => m(942, x))].includes(id)));
  });
});
