import { anonymizeId } from '../../src/shared/anonymize';
import { createTestApp, TEST_ANON_SECRET } from '../support/services';
import { issueKey, messageRecord, ndjson, provisionCompany, recordMessages, settle } from '../support/conversation-fixtures';
import type { MessageRecordInput } from '../../src/commands/conversation/message-input';

// GET /api/v1/qualitative-export/messages: every query rule, every field of the record, paging, errors.

const NOW = '2024-02-01T00:00:00.000Z';
const KEY_101 = 'sbk_export101company0000000000000000';
const KEY_102 = 'sbk_export102company0000000000000000';
const GLOBAL = 'sbk_global_exportglobal000000000000000';
const JAN = { from: '2024-01-01T00:00:00Z', to: '2024-01-31T00:00:00Z' };

const a = (companyId: number, kind: Parameters<typeof anonymizeId>[2], id: string | number) => anonymizeId(TEST_ANON_SECRET, companyId, kind, id);

const at = (hms: string) => `2024-01-10T${hms}.000Z`;
const M: Record<string, MessageRecordInput> = {
  M1: messageRecord({
    companyId: 101, id: 'real-msg-A1', conversationId: 'real-conv-A', occurredAt: at('10:00:00'), channel: 'PROVIDER_MSGAPP',
    classifications: [{ label: 'intent', value: 'purchase' }, { label: 'score', value: 0.93 }],
    extractions: [{ key: 'email', value: 'buyer@example.test' }],
  }),
  M2: messageRecord({
    companyId: 101, id: 'real-msg-A2', conversationId: 'real-conv-A', occurredAt: at('10:01:00'), channel: 'MSGAPP_GATEWAY',
    direction: 'outbound', author: { type: 'agent', agentId: 7 }, contactPhone: null, replyToMessageId: 'real-msg-A1',
    content: { type: 'text', text: 'Line "one"\nline two', mediaUrl: null, mediaMime: null },
    classifications: [{ label: 'tone', value: { polite: true } }],
    toolCalls: [{ toolName: 'lookup_order', success: true, executionTimeMs: 120 }, { toolName: 'refund', success: false, executionTimeMs: 33 }],
    traceId: 'trace-A2',
  }),
  M3: messageRecord({
    companyId: 101, id: 'real-msg-A3', conversationId: 'real-conv-A', occurredAt: at('10:02:00'), channel: 'PHOTOAPP',
    direction: 'outbound', author: { type: 'human_operator', operatorId: 9 }, contactPhone: null,
    content: { type: 'image', text: '', mediaUrl: 'https://cdn.example.test/p.jpg', mediaMime: 'image/jpeg' },
  }),
  M4: messageRecord({
    companyId: 101, id: 'real-msg-A4', conversationId: 'real-conv-A', occurredAt: at('10:03:00'), channel: 'SOCIALMSG',
    direction: 'outbound', author: { type: 'system' }, contactPhone: null, traceId: 'trace-of-system',
    content: { type: 'system', text: 'conversation assigned', mediaUrl: null, mediaMime: null },
  }),
  M5: messageRecord({
    companyId: 101, id: 'real-msg-A5', conversationId: 'real-conv-A', occurredAt: at('10:04:00'), channel: 'FLOWTOOL_PHOTOAPP', deleted: true,
  }),
  M6: messageRecord({
    companyId: 101, id: 'real-msg-A6', conversationId: 'real-conv-B', occurredAt: '2024-01-10T07:05:00.25-03:00', channel: 'FLOWTOOL_MSGAPP',
    direction: 'outbound', author: { type: 'agent', agentId: 7 }, contactPhone: null, traceId: null,
  }),
  M7: messageRecord({ companyId: 101, id: 'real-msg-A7', conversationId: 'real-conv-A', occurredAt: '2024-03-05T10:00:00.000Z' }),
  // company 102 reuses the real message and conversation ids of 101
  N1: messageRecord({ companyId: 102, id: 'real-msg-A1', conversationId: 'real-conv-A', occurredAt: at('10:00:30') }),
  N2: messageRecord({
    companyId: 102, id: 'real-msg-N2', conversationId: 'real-conv-A', occurredAt: at('10:01:30'), direction: 'outbound',
    author: { type: 'agent', agentId: 8 }, contactPhone: null, traceId: 'trace-N2',
  }),
  N3: messageRecord({
    companyId: 102, id: 'real-msg-N3', conversationId: 'real-conv-A', occurredAt: at('10:02:00'), direction: 'outbound',
    author: { type: 'system' }, contactPhone: null,
  }),
};

type TestApp = Awaited<ReturnType<typeof createTestApp>>;

async function setUp(): Promise<TestApp> {
  const t = await createTestApp({ now: () => new Date(NOW) });
  await provisionCompany(t.services, {
    companyId: 101, agents: [{ id: 7, name: 'Sales Bot', version: '2.1.0' }], operators: [{ id: 9, name: 'Ana' }], keys: [KEY_101],
  });
  await provisionCompany(t.services, { companyId: 102, agents: [{ id: 8, name: 'Support Bot', version: '1.0' }], keys: [KEY_102] });
  await provisionCompany(t.services, { companyId: 103 });
  await issueKey(t.services, GLOBAL, null);
  await settle(t.services);
  const outcomes = await recordMessages(t.services, Object.values(M));
  expect(outcomes.every((o) => o.status === 'recorded')).toBe(true);
  await settle(t.services);
  return t;
}

function get(t: TestApp, query: Record<string, string>, key: string | null = GLOBAL) {
  return t.app.inject({
    method: 'GET',
    url: '/api/v1/qualitative-export/messages',
    query,
    headers: key === null ? {} : { 'x-api-key': key },
  });
}

const ids = (lines: any[]) => lines.map((l) => l.message_id);
const mid = (companyId: number, rec: MessageRecordInput) => a(companyId, 'message', rec.id);

describe('GET /api/v1/qualitative-export/messages', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await setUp();
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('the exported record', () => {
    it('has every field of the spec, in order, anonymized, with all includes', async () => {
      const res = await get(t, { company_id: '101', ...JAN, include: 'classifications,extractions,tool_calls,trace_id' }, KEY_101);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/x-ndjson');
      const lines = ndjson(res.body);
      const metadata = { client_id: a(101, 'company', 101), company_id: 101, exported_at: NOW, schema_version: '1.0' };
      const conversationA = a(101, 'conversation', 'real-conv-A');
      expect(lines).toEqual([
        {
          message_id: a(101, 'message', 'real-msg-A1'), conversation_id: conversationA, occurred_at: '2024-01-10T10:00:00.000Z',
          channel: 'PROVIDER_MSGAPP', direction: 'inbound',
          author: { type: 'contact', id: a(101, 'contact', 918273), display_name: null },
          agent: null,
          content: { type: 'text', text: 'hello', media_url: null, media_mime: null },
          context: { reply_to_message_id: null, thread_position: null },
          metadata,
          classifications: [{ label: 'intent', value: 'purchase' }, { label: 'score', value: 0.93 }],
          extractions: [{ key: 'email', value: 'buyer@example.test' }],
          tool_calls: [],
          trace_id: null,
        },
        {
          message_id: a(101, 'message', 'real-msg-A2'), conversation_id: conversationA, occurred_at: '2024-01-10T10:01:00.000Z',
          channel: 'MSGAPP_GATEWAY', direction: 'outbound',
          author: { type: 'agent', id: a(101, 'agent', 7), display_name: 'Sales Bot' },
          agent: { id: 7, name: 'Sales Bot', version: '2.1.0' },
          content: { type: 'text', text: 'Line "one"\nline two', media_url: null, media_mime: null },
          context: { reply_to_message_id: a(101, 'message', 'real-msg-A1'), thread_position: null },
          metadata,
          classifications: [{ label: 'tone', value: { polite: true } }],
          extractions: [],
          tool_calls: [
            { tool_name: 'lookup_order', success: true, execution_time_ms: 120 },
            { tool_name: 'refund', success: false, execution_time_ms: 33 },
          ],
          trace_id: 'trace-A2',
        },
        {
          message_id: a(101, 'message', 'real-msg-A3'), conversation_id: conversationA, occurred_at: '2024-01-10T10:02:00.000Z',
          channel: 'PHOTOAPP', direction: 'outbound',
          author: { type: 'human_operator', id: a(101, 'operator', 9), display_name: null },
          agent: null,
          content: { type: 'image', text: '', media_url: 'https://cdn.example.test/p.jpg', media_mime: 'image/jpeg' },
          context: { reply_to_message_id: null, thread_position: null },
          metadata, classifications: [], extractions: [], tool_calls: [], trace_id: null,
        },
        {
          message_id: a(101, 'message', 'real-msg-A4'), conversation_id: conversationA, occurred_at: '2024-01-10T10:03:00.000Z',
          channel: 'SOCIALMSG', direction: 'outbound',
          author: { type: 'system', id: null, display_name: null },
          agent: null,
          content: { type: 'system', text: 'conversation assigned', media_url: null, media_mime: null },
          context: { reply_to_message_id: null, thread_position: null },
          // a trace id is only exported for outgoing AI-agent messages
          metadata, classifications: [], extractions: [], tool_calls: [], trace_id: null,
        },
        {
          message_id: a(101, 'message', 'real-msg-A6'), conversation_id: a(101, 'conversation', 'real-conv-B'),
          occurred_at: '2024-01-10T10:05:00.250Z', channel: 'FLOWTOOL_MSGAPP', direction: 'outbound',
          author: { type: 'agent', id: a(101, 'agent', 7), display_name: 'Sales Bot' },
          agent: { id: 7, name: 'Sales Bot', version: '2.1.0' },
          content: { type: 'text', text: 'hello', media_url: null, media_mime: null },
          context: { reply_to_message_id: null, thread_position: null },
          metadata, classifications: [], extractions: [], tool_calls: [], trace_id: null,
        },
      ]);
      for (const l of lines) {
        expect(Object.keys(l)).toEqual([
          'message_id', 'conversation_id', 'occurred_at', 'channel', 'direction', 'author', 'agent', 'content', 'context', 'metadata',
          'classifications', 'extractions', 'tool_calls', 'trace_id',
        ]);
        expect(Object.keys(l.author)).toEqual(['type', 'id', 'display_name']);
        expect(Object.keys(l.metadata)).toEqual(['client_id', 'company_id', 'exported_at', 'schema_version']);
        expect(l.message_id).toMatch(/^msg_[0-9a-f]{24}$/);
        expect(l.conversation_id).toMatch(/^conv_[0-9a-f]{24}$/);
        expect(l.metadata.client_id).toMatch(/^cmp_[0-9a-f]{24}$/);
      }
      expect(lines[0].author.id).toMatch(/^ctc_[0-9a-f]{24}$/);
      expect(lines[1].author.id).toMatch(/^agt_[0-9a-f]{24}$/);
      expect(lines[2].author.id).toMatch(/^op_[0-9a-f]{24}$/);
      // one JSON object per line, nothing else
      expect(res.body.endsWith('\n')).toBe(true);
      expect(res.body.split('\n')).toHaveLength(lines.length + 1);
    });

    it('includes classifications by default, and only them', async () => {
      const lines = ndjson((await get(t, { company_id: '101', ...JAN })).body);
      expect(lines).toHaveLength(5);
      for (const l of lines) {
        expect(l).toHaveProperty('classifications');
        expect(l).not.toHaveProperty('extractions');
        expect(l).not.toHaveProperty('tool_calls');
        expect(l).not.toHaveProperty('trace_id');
      }
    });

    it('include chooses the optional fields: a given list replaces the default; empty means none', async () => {
      const only = ndjson((await get(t, { company_id: '101', ...JAN, include: 'trace_id' })).body);
      expect(only.map((l) => l.trace_id)).toEqual([null, 'trace-A2', null, null, null]);
      expect(only[0]).not.toHaveProperty('classifications');
      const some = ndjson((await get(t, { company_id: '101', ...JAN, include: ' extractions , tool_calls,extractions' })).body);
      expect(Object.keys(some[0]).slice(-2)).toEqual(['extractions', 'tool_calls']);
      const none = ndjson((await get(t, { company_id: '101', ...JAN, include: '' })).body);
      expect(Object.keys(none[0]).at(-1)).toBe('metadata');
    });

    it('excludes deleted messages and messages outside [from, to)', async () => {
      const all = ids(ndjson((await get(t, { company_id: '101', from: '2024-01-01', to: '2024-01-31' })).body));
      expect(all).not.toContain(mid(101, M.M5));
      expect(all).not.toContain(mid(101, M.M7));
      // from is inclusive, to exclusive
      const edge = ids(ndjson((await get(t, { company_id: '101', from: '2024-01-10T10:01:00Z', to: '2024-01-10T10:03:00Z' })).body));
      expect(edge).toEqual([mid(101, M.M2), mid(101, M.M3)]);
    });

    it('accepts ISO 8601 with offsets (also a + decoded as a space) and date-only values', async () => {
      const url = `/api/v1/qualitative-export/messages?company_id=101&from=${encodeURIComponent('2024-01-10T07:01:00-03:00')}&to=2024-01-10T13:03:00+03:00`;
      const res = await t.app.inject({ method: 'GET', url, headers: { 'x-api-key': GLOBAL } });
      expect(res.statusCode).toBe(200);
      expect(ids(ndjson(res.body))).toEqual([mid(101, M.M2), mid(101, M.M3)]);
    });
  });

  describe('filters', () => {
    it.each([
      ['msgapp', ['M1', 'M2', 'M6']],
      ['photoapp', ['M3']],
      ['socialmsg', ['M4']],
      ['all', ['M1', 'M2', 'M3', 'M4', 'M6']],
    ])('channel=%s selects its platforms', async (channel, expected) => {
      const lines = ndjson((await get(t, { company_id: '101', ...JAN, channel })).body);
      expect(ids(lines)).toEqual(expected.map((k) => mid(101, M[k])));
    });

    it.each([
      ['incoming', ['M1']],
      ['outgoing', ['M2', 'M3', 'M4', 'M6']],
      ['all', ['M1', 'M2', 'M3', 'M4', 'M6']],
    ])('direction=%s', async (direction, expected) => {
      const lines = ndjson((await get(t, { company_id: '101', ...JAN, direction })).body);
      expect(ids(lines)).toEqual(expected.map((k) => mid(101, M[k])));
    });

    it('agent_id selects the messages those AI agents wrote (one id or a list)', async () => {
      expect(ids(ndjson((await get(t, { company_id: '101', ...JAN, agent_id: '7' })).body))).toEqual([mid(101, M.M2), mid(101, M.M6)]);
      expect(ids(ndjson((await get(t, { company_id: '101,102', ...JAN, agent_id: '8, 7' })).body))).toEqual([
        mid(101, M.M2), mid(102, M.N2), mid(101, M.M6),
      ]);
      expect(ndjson((await get(t, { company_id: '101', ...JAN, agent_id: '999' })).body)).toEqual([]);
    });

    it('an empty result is an empty 200 stream', async () => {
      const res = await get(t, { company_id: '103', ...JAN });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/x-ndjson');
      expect(res.body).toBe('');
    });
  });

  describe('several companies (global key)', () => {
    it('merges them in (occurred_at, company) order, each company with its own ids', async () => {
      const lines = ndjson((await get(t, { company_id: '102,101', ...JAN })).body);
      expect(ids(lines)).toEqual([
        mid(101, M.M1), mid(102, M.N1), mid(101, M.M2), mid(102, M.N2), mid(101, M.M3), mid(102, M.N3), mid(101, M.M4), mid(101, M.M6),
      ]);
      expect(lines.map((l) => l.metadata.company_id)).toEqual([101, 102, 101, 102, 101, 102, 101, 101]);
    });

    it("a company's records are identical whether exported alone or with others", async () => {
      const alone = ndjson((await get(t, { company_id: '101', ...JAN, include: 'classifications,extractions,tool_calls,trace_id' })).body);
      const together = ndjson((await get(t, { company_id: '101,102,103', ...JAN, include: 'classifications,extractions,tool_calls,trace_id' })).body);
      expect(together.filter((l) => l.metadata.company_id === 101)).toEqual(alone);
    });

    it('the same real ids give different anonymized ids in different companies', async () => {
      const lines = ndjson((await get(t, { company_id: '101,102', ...JAN })).body);
      const m1 = lines.find((l) => l.metadata.company_id === 101 && l.occurred_at === '2024-01-10T10:00:00.000Z');
      const n1 = lines.find((l) => l.metadata.company_id === 102 && l.occurred_at === '2024-01-10T10:00:30.000Z');
      // same real message id, conversation id and contact id
      expect(m1.message_id).not.toBe(n1.message_id);
      expect(m1.conversation_id).not.toBe(n1.conversation_id);
      expect(m1.author.id).not.toBe(n1.author.id);
      expect(m1.metadata.client_id).not.toBe(n1.metadata.client_id);
    });

    it('no real message, conversation, contact, operator or company id appears except metadata.company_id and agent.id', async () => {
      const res = await get(t, { company_id: '101,102', ...JAN, include: 'classifications,extractions,tool_calls,trace_id', limit: '3' });
      const real = new Set<string>(['918273', '9', '101', '102', '7', '8']);
      for (const r of Object.values(M)) {
        real.add(r.id);
        real.add(r.conversationId);
        if (r.replyToMessageId) real.add(r.replyToMessageId);
      }
      expect(res.body).not.toMatch(/real-msg|real-conv|918273/);
      const lines = ndjson(res.body);
      const walk = (v: unknown, path: string) => {
        if (v !== null && typeof v === 'object') {
          for (const [k, x] of Object.entries(v)) walk(x, path ? `${path}.${k}` : k);
          return;
        }
        if (path === 'metadata.company_id' || path === 'agent.id') return;
        if (typeof v === 'number' || typeof v === 'string') expect({ path, leaked: real.has(String(v)) }).toEqual({ path, leaked: false });
      };
      for (const l of lines) if (!('_truncated' in l)) walk(l, '');
      // the cursor is opaque too: it carries real ids only encrypted
      const sentinel = lines.at(-1);
      expect(Buffer.from(sentinel.next_cursor, 'base64url').toString('latin1')).not.toMatch(/real-msg|real-conv/);
    });
  });

  describe('paging', () => {
    it('follows cursors through every row exactly once, in order; the sentinel only when more rows exist', async () => {
      const full = ids(ndjson((await get(t, { company_id: '101,102', ...JAN })).body));
      expect(full).toHaveLength(8);
      for (const limit of [1, 2, 3, 7]) {
        const seen: string[] = [];
        let cursor: string | undefined;
        let pages = 0;
        do {
          const res = await get(t, { company_id: '101,102', ...JAN, limit: String(limit), ...(cursor ? { cursor } : {}) });
          expect(res.statusCode).toBe(200);
          const lines = ndjson(res.body);
          const last = lines.at(-1);
          if (last && '_truncated' in last) {
            expect(Object.keys(last)).toEqual(['_truncated', 'next_cursor']);
            expect(last._truncated).toBe(true);
            expect(typeof last.next_cursor).toBe('string');
            expect(lines).toHaveLength(limit + 1);
            cursor = last.next_cursor;
            lines.pop();
          } else {
            cursor = undefined;
          }
          seen.push(...ids(lines));
          pages++;
        } while (cursor);
        expect(seen).toEqual(full);
        expect(pages).toBe(Math.ceil(full.length / limit));
      }
    });

    it('no sentinel when the page holds exactly the remaining rows', async () => {
      const lines = ndjson((await get(t, { company_id: '101', ...JAN, limit: '5' })).body);
      expect(lines).toHaveLength(5);
      expect(lines.some((l) => '_truncated' in l)).toBe(false);
      const four = ndjson((await get(t, { company_id: '101', ...JAN, limit: '4' })).body);
      expect(four).toHaveLength(5);
      expect(four[4]._truncated).toBe(true);
    });

    it('a cursor may change limit and include, but not the filters', async () => {
      const first = ndjson((await get(t, { company_id: '101', ...JAN, limit: '2' })).body);
      const cursor = first.at(-1).next_cursor;
      const next = await get(t, { company_id: '101', ...JAN, limit: '10', include: 'trace_id', cursor });
      expect(ids(ndjson(next.body))).toEqual([mid(101, M.M3), mid(101, M.M4), mid(101, M.M6)]);

      for (const other of [
        { company_id: '101,102', ...JAN },
        { company_id: '101', from: '2024-01-02T00:00:00Z', to: JAN.to },
        { company_id: '101', from: JAN.from, to: '2024-01-30T00:00:00Z' },
        { company_id: '101', ...JAN, channel: 'msgapp' },
        { company_id: '101', ...JAN, direction: 'outgoing' },
        { company_id: '101', ...JAN, agent_id: '7' },
      ]) {
        const res = await get(t, { ...other, cursor });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toEqual({ error: { code: 'INVALID_PARAMETER', message: expect.stringContaining('cursor') } });
      }
      // the same filters written differently are the same filters
      const same = await get(t, { company_id: ' 101 ', from: '2024-01-01', to: '2024-01-31T00:00:00.000Z', channel: 'all', direction: 'all', cursor });
      expect(same.statusCode).toBe(200);
    });

    it('a tampered or made-up cursor is a 400 INVALID_PARAMETER', async () => {
      const first = ndjson((await get(t, { company_id: '101', ...JAN, limit: '2' })).body);
      const cursor: string = first.at(-1).next_cursor;
      const flipped = cursor.slice(0, 10) + (cursor[10] === 'A' ? 'B' : 'A') + cursor.slice(11);
      for (const bad of [flipped, cursor.slice(0, -2), `${cursor}AA`, 'not-a-cursor', 'eyJoZWxsbyI6MX0', '!!!']) {
        const res = await get(t, { company_id: '101', ...JAN, cursor: bad });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toEqual({ error: { code: 'INVALID_PARAMETER', message: expect.stringContaining('cursor') } });
      }
    });
  });

  describe('parameter errors: 400 INVALID_PARAMETER naming the parameter', () => {
    const base = { company_id: '101', ...JAN };
    it.each([
      ['company_id missing', { from: JAN.from, to: JAN.to }, 'company_id'],
      ['company_id empty', { ...base, company_id: '' }, 'company_id'],
      ['company_id not an integer', { ...base, company_id: 'abc' }, 'company_id'],
      ['company_id list with a non-integer', { ...base, company_id: '101,abc' }, 'company_id'],
      ['company_id decimal', { ...base, company_id: '1.5' }, 'company_id'],
      ['company_id empty list item', { ...base, company_id: '101,,102' }, 'company_id'],
      ['company_id zero', { ...base, company_id: '0' }, 'company_id'],
      ['from missing', { company_id: '101', to: JAN.to }, 'from'],
      ['to missing', { company_id: '101', from: JAN.from }, 'to'],
      ['from not ISO', { ...base, from: 'yesterday' }, 'from'],
      ['to not a real date', { ...base, to: '2024-02-30T00:00:00Z' }, 'to'],
      ['from equal to to', { ...base, from: JAN.to }, 'from'],
      ['from after to', { ...base, from: '2024-01-31T00:00:01Z' }, 'from'],
      ['range over 31 days', { ...base, from: '2024-01-01T00:00:00Z', to: '2024-02-01T00:00:00.001Z' }, '31 days'],
      ['limit zero', { ...base, limit: '0' }, 'limit'],
      ['limit above 10000', { ...base, limit: '10001' }, 'limit'],
      ['limit not an integer', { ...base, limit: '2.5' }, 'limit'],
      ['limit text', { ...base, limit: 'all' }, 'limit'],
      ['unknown channel', { ...base, channel: 'email' }, 'channel'],
      ['platform name as channel', { ...base, channel: 'PHOTOAPP' }, 'channel'],
      ['unknown direction', { ...base, direction: 'inbound' }, 'direction'],
      ['agent_id not an integer', { ...base, agent_id: 'bot' }, 'agent_id'],
      ['unknown include value', { ...base, include: 'classifications,sentiment' }, 'include'],
    ])('%s', async (_name, query, names) => {
      const res = await get(t, query as Record<string, string>);
      expect(res.statusCode).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const body = res.json();
      expect(body).toEqual({ error: { code: 'INVALID_PARAMETER', message: expect.any(String) } });
      expect(body.error.message).toContain(names);
    });

    it('a range of exactly 31 days is accepted', async () => {
      const res = await get(t, { company_id: '101', from: '2024-01-01T00:00:00Z', to: '2024-02-01T00:00:00Z' });
      expect(res.statusCode).toBe(200);
    });

    it('limit 10000 is accepted', async () => {
      expect((await get(t, { company_id: '101', ...JAN, limit: '10000' })).statusCode).toBe(200);
    });

    it('a parameter given twice is a 400 naming it', async () => {
      const res = await t.app.inject({
        method: 'GET', url: `/api/v1/qualitative-export/messages?company_id=101&company_id=102&from=${JAN.from}&to=${JAN.to}`,
        headers: { 'x-api-key': GLOBAL },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('INVALID_PARAMETER');
      expect(res.json().error.message).toContain('company_id');
    });
  });

  it('is described in the OpenAPI document with its query parameters', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const op = doc.paths['/api/v1/qualitative-export/messages'].get;
    expect(op.parameters.map((p: { name: string }) => p.name).sort()).toEqual(
      ['agent_id', 'channel', 'company_id', 'cursor', 'direction', 'from', 'include', 'limit', 'to'],
    );
  });

  describe('authentication and access', () => {
    it('401 AUTH_REQUIRED without a key, whatever the parameters', async () => {
      for (const query of [{ company_id: '101', ...JAN }, { limit: 'x' }] as Array<Record<string, string>>) {
        const res = await get(t, query, null);
        expect(res.statusCode).toBe(401);
        expect(res.json()).toEqual({ error: { code: 'AUTH_REQUIRED', message: expect.any(String) } });
      }
    });

    it('401 for an unknown key', async () => {
      const res = await get(t, { company_id: '101', ...JAN }, 'sbk_unknownkey000000000000000000');
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('AUTH_REQUIRED');
    });

    it('403 COMPANY_ACCESS_DENIED for a company key asking for another company, also inside a list', async () => {
      for (const company_id of ['102', '101,102', '102,101', '999']) {
        const res = await get(t, { company_id, ...JAN }, KEY_101);
        expect(res.statusCode).toBe(403);
        expect(res.json()).toEqual({ error: { code: 'COMPANY_ACCESS_DENIED', message: expect.stringContaining('company') } });
      }
    });

    it('a company key exports its own company; a global key any set of companies', async () => {
      expect(ids(ndjson((await get(t, { company_id: '102', ...JAN }, KEY_102)).body))).toEqual([mid(102, M.N1), mid(102, M.N2), mid(102, M.N3)]);
      expect((await get(t, { company_id: '101,101', ...JAN }, KEY_101)).statusCode).toBe(200);
      expect((await get(t, { company_id: '101,102,103', ...JAN }, GLOBAL)).statusCode).toBe(200);
    });
  });
});

describe('anonymized ids across processes', () => {
  it('two separately built services with the same secret export identical records', async () => {
    const one = await setUp();
    let first: string;
    try {
      first = (await get(one, { company_id: '101,102', ...JAN, include: 'classifications,extractions,tool_calls,trace_id' })).body;
    } finally {
      await one.close();
    }
    // a second, independent service (own database, own app, own caches), as after a restart elsewhere
    const two = await setUp();
    try {
      const second = (await get(two, { company_id: '101,102', ...JAN, include: 'classifications,extractions,tool_calls,trace_id' })).body;
      expect(second).toBe(first);
      expect(ndjson(second)).toHaveLength(8);
    } finally {
      await two.close();
    }
  });
});
