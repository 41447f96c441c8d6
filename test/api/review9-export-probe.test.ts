import { createTestApp } from '../support/services';
import { issueKey, messageRecord, ndjson, provisionCompany, recordMessages, settle } from '../support/conversation-fixtures';

const GLOBAL = 'sbk_global_review9probe000000000000000';
const KEY = 'sbk_review9probe931company0000000000';
const PATH = '/api/v1/qualitative-export/messages';

describe('probe export', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp();
    await provisionCompany(t.services, { companyId: 931, agents: [{ id: 7, name: 'Bot', version: '1' }], operators: [{ id: 9, name: 'Ana' }], keys: [KEY] });
    await issueKey(t.services, GLOBAL, null);
    await settle(t.services);
  });
  afterAll(() => t.close());

  it('probes', async () => {
    const big = '€'.repeat(1_000_000) + '😀'.repeat(500_000) + '"\\\n\u2028';
    const out = await recordMessages(t.services, [
      messageRecord({ companyId: 931, id: 'big', conversationId: 'c', occurredAt: '2024-01-10T10:00:00Z', content: { type: 'text', text: big, mediaUrl: null, mediaMime: null },
        classifications: Array.from({ length: 20000 }, (_, i) => ({ label: `l${i}`, value: '€😀'.repeat(10) })) }),
      messageRecord({ companyId: 931, id: 'small', conversationId: 'c', occurredAt: '2024-01-10T10:00:01Z' }),
      messageRecord({ companyId: 931, id: 'ph', conversationId: 'c', occurredAt: '2024-01-10T10:00:02Z', contactPhone: '+5491155551234', author: { type: 'contact', contactId: 5 } }),
    ]);
    console.log(JSON.stringify(out));
    await settle(t.services);
    const r = await t.app.inject({ method: 'GET', url: PATH, query: { company_id: '931', from: '2024-01-01', to: '2024-01-31', include: 'classifications,extractions,tool_calls,trace_id' }, headers: { 'x-api-key': GLOBAL } });
    const lines = ndjson(r.body);
    console.log(r.statusCode, lines.length, lines[0].content.text === big, lines[0].classifications.length, JSON.stringify(lines[2]));
    const res: string[] = [];
    const q = async (label: string, query: Record<string, string | string[]>, key = GLOBAL) => {
      const x = await t.app.inject({ method: 'GET', url: PATH, query, headers: { 'x-api-key': key } });
      res.push(`${label}: ${x.statusCode} ${x.body.slice(0, 200)}`);
    };
    const base = { company_id: '931', from: '2024-01-01', to: '2024-01-31' };
    await q('limit 0', { ...base, limit: '0' });
    await q('limit -1', { ...base, limit: '-1' });
    await q('limit 1.5', { ...base, limit: '1.5' });
    await q('limit empty', { ...base, limit: '' });
    await q('company 0', { ...base, company_id: '0' });
    await q('company huge', { ...base, company_id: '99999999999' });
    await q('company neg', { ...base, company_id: '-1' });
    await q('company empty', { ...base, company_id: '' });
    await q('company unicode digits', { ...base, company_id: '٩٣١' });
    await q('from after to', { ...base, from: '2024-01-31', to: '2024-01-01' });
    await q('from garbage', { ...base, from: 'yesterday' });
    await q('from 0000', { ...base, from: '0000-12-31T23:00:00-02:00', to: '0001-01-10' });
    await q('from feb 30', { ...base, from: '2024-02-30' });
    await q('from 24:00', { ...base, from: '2024-01-01T24:00:00Z' });
    await q('from leap sec', { ...base, from: '2024-01-01T23:59:60Z' });
    await q('32 days', { ...base, from: '2024-01-01', to: '2024-02-02' });
    await q('31d + 1ms', { ...base, from: '2024-01-01T00:00:00Z', to: '2024-02-01T00:00:00.001Z' });
    await q('offset 31d', { ...base, from: '2024-01-01T00:00:00+14:00', to: '2024-01-31T00:00:00-12:00' });
    await q('channel upper', { ...base, channel: 'MSGAPP' });
    await q('direction inbound', { ...base, direction: 'inbound' });
    await q('include bad', { ...base, include: 'foo' });
    await q('include upper', { ...base, include: 'Classifications' });
    await q('agent 0', { ...base, agent_id: '0' });
    await q('agent empty', { ...base, agent_id: '' });
    await q('agent list', { ...base, agent_id: '7, 8' });
    await q('cursor garbage', { ...base, cursor: 'abc' });
    await q('cursor long', { ...base, cursor: 'a'.repeat(100000) });
    await q('cursor !', { ...base, cursor: '!!!' });
    await q('array', { ...base, limit: ['1', '2'] });
    await q('company key other', { ...base, company_id: '931,932' }, KEY);
    await q('company key own', { ...base, limit: '1' }, KEY);
    await q('no key', { ...base }, 'nope');
    console.log(res.join('\n'));
  });
});
