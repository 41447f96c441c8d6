import { ConversationRecorder, type RecordOutcome } from '../../src/commands/conversation/handler';
import { conversationEventId, type MessageToRecord } from '../../src/commands/conversation/decider';
import { parseMessageRecord, type MessageRecordInput } from '../../src/commands/conversation/message-input';
import type { EventStore, StreamAppend } from '../../src/ports/event-store';
import { createTestContext, type TestContext } from '../support/services';
import { messageRecord, provisionCompany } from '../support/conversation-fixtures';

// The recorder records the conversations of a batch together on Postgres (one read, one appendMany): the same
// outcomes and events as recording the lines one by one, in line order per conversation; a concurrent writer or an
// event the store refuses in one conversation loses no line of the others.

const parse = (records: MessageRecordInput[]): MessageToRecord[] => records.map((r) => {
  const p = parseMessageRecord(r);
  if (!p.ok) throw new Error(`test record ${r.id} is invalid: ${p.reason}`);
  return p.message;
});

/** Outcomes with the company's number out of the reasons (to compare two companies' outcomes). */
const anyCompany = (outcomes: RecordOutcome[], companyId: number): RecordOutcome[] =>
  outcomes.map((o) => (o.status === 'rejected' ? { ...o, reason: o.reason.replace(`company ${companyId}`, 'company N') } : o));

/** The real store; `beforeFirstAppendMany` runs (another writer's turn) just before the first appendMany goes to it. */
function watchedStore(inner: EventStore, beforeFirstAppendMany: () => Promise<void> = async () => {}) {
  const calls = { appendMany: 0 };
  const store = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'appendMany') {
        return async (appends: StreamAppend[]) => {
          if (calls.appendMany++ === 0) await beforeFirstAppendMany();
          return target.appendMany(appends);
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store, calls };
}

describe('conversation recorder: the conversations of a batch together', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ runner: false });
    for (const companyId of [511, 512, 513]) await provisionCompany(ctx.services, { companyId, agents: [{ id: 7, name: 'Bot', version: '3' }] });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const t = (m: number) => `2024-02-10T10:${String(m).padStart(2, '0')}:00.000Z`;
  const record = (companyId: number, conversationId: string, id: string, m: number, over: Partial<MessageRecordInput> = {}) =>
    messageRecord({ companyId, conversationId, id, occurredAt: t(m), ...over });

  /** Each stream's events of the company as `type messageId`, in revision order. */
  async function streams(companyId: number): Promise<Record<string, string[]>> {
    const r = await ctx.services.pool.query<{ stream_id: string; type: string; message_id: string }>(
      `SELECT stream_id, type, data->>'messageId' AS message_id FROM es.events WHERE stream_id LIKE $1 ORDER BY stream_id, stream_revision`,
      [`conversation-${companyId}-%`],
    );
    const out: Record<string, string[]> = {};
    for (const row of r.rows) (out[row.stream_id.slice(`conversation-${companyId}-`.length)] ??= []).push(`${row.type} ${row.message_id}`);
    return out;
  }

  it('interleaved conversations: outcomes in line order and each conversation\'s events in line order, as one by one', async () => {
    const file = (companyId: number) => parse([
      record(companyId, 'a', 'm1', 1),
      record(companyId, 'b', 'm2', 2),
      record(companyId, 'a', 'm3', 3),
      record(companyId, 'c', 'm4', 4),
      record(companyId, 'a', 'm1', 1, { deleted: true }),
      record(companyId, 'b', 'm5', 5),
      record(companyId, 'a', 'm1', 1),
      record(companyId, 'c', 'm4', 4),
      record(companyId, 'a', 'm2', 9), // m2 is b's: a duplicate in another conversation
      record(companyId, 'b', 'm7', 7, { direction: 'outbound', author: { type: 'agent', agentId: 99 } }),
      record(companyId, 'c', 'm8', 8),
    ]);
    const expected: RecordOutcome['status'][] = [
      'recorded', 'recorded', 'recorded', 'recorded', 'deleted', 'recorded', 'restored', 'unchanged', 'rejected', 'rejected', 'recorded',
    ];
    const { store, calls } = watchedStore(ctx.services.store);
    const together = new ConversationRecorder({ ...ctx.services, store });
    const oneByOne = new ConversationRecorder(ctx.services);
    const byOne = async (messages: MessageToRecord[]) => {
      const outcomes: RecordOutcome[] = [];
      for (const m of messages) outcomes.push(...(await oneByOne.record([m], { actor: 'test' })).outcomes);
      return outcomes;
    };

    const first = await together.record(file(511), { actor: 'test' });
    expect(calls.appendMany).toBeGreaterThan(0);
    expect(first.outcomes.map((o) => o.status)).toEqual(expected);
    expect(first.outcomes[8]).toEqual({ status: 'rejected', code: 'DUPLICATE_MESSAGE_ID', reason: expect.stringContaining('"m2"') });
    expect(first.outcomes[9]).toEqual({ status: 'rejected', code: 'UNKNOWN_AGENT', reason: expect.any(String) });
    expect(anyCompany(first.outcomes, 511)).toEqual(anyCompany(await byOne(file(512)), 512));
    expect(await streams(511)).toEqual({
      a: ['MessageRecorded m1', 'MessageRecorded m3', 'MessageDeleted m1', 'MessageRestored m1'],
      b: ['MessageRecorded m2', 'MessageRecorded m5'],
      c: ['MessageRecorded m4', 'MessageRecorded m8'],
    });
    expect(await streams(511)).toEqual(await streams(512));

    // the same file again, by a fresh recorder (an import run again): the same as one by one again
    const again = await new ConversationRecorder({ ...ctx.services, store }).record(file(511), { actor: 'test' });
    expect(anyCompany(again.outcomes, 511)).toEqual(anyCompany(await byOne(file(512)), 512));
    expect(again.outcomes.filter((o) => o.status === 'recorded')).toEqual([]);
    expect(await streams(511)).toEqual(await streams(512));
  });

  it('another writer appends to one conversation between the read and the append: every line of every conversation is recorded', async () => {
    const other = new ConversationRecorder(ctx.services);
    const { store, calls } = watchedStore(ctx.services.store, async () => {
      const { outcomes } = await other.record(parse([record(513, 'x', 'x-c', 3), record(513, 'x', 'x-z', 4)]), { actor: 'other' });
      expect(outcomes).toEqual([{ status: 'recorded' }, { status: 'recorded' }]);
    });
    const recorder = new ConversationRecorder({ ...ctx.services, store });
    const { outcomes, position } = await recorder.record(
      parse([record(513, 'x', 'x-a', 1), record(513, 'y', 'y-b', 2), record(513, 'x', 'x-c', 3), record(513, 'z', 'z-d', 5)]),
      { actor: 'test' },
    );
    expect(calls.appendMany).toBe(1);
    expect(outcomes.map((o) => o.status)).toEqual(['recorded', 'recorded', 'unchanged', 'recorded']);
    expect(position).toBeDefined();
    const s = await streams(513);
    expect(s).toMatchObject({ x: ['MessageRecorded x-c', 'MessageRecorded x-z', 'MessageRecorded x-a'], y: ['MessageRecorded y-b'], z: ['MessageRecorded z-d'] });
  });

  it('another writer appends other messages to one conversation meanwhile (a revision conflict): every line is recorded after theirs', async () => {
    const other = new ConversationRecorder(ctx.services);
    const { store, calls } = watchedStore(ctx.services.store, async () => {
      await other.record(parse([record(513, 'r', 'r-other', 30)]), { actor: 'other' });
    });
    const { outcomes } = await new ConversationRecorder({ ...ctx.services, store }).record(
      parse([record(513, 'r', 'r-1', 31), record(513, 's', 's-1', 32), record(513, 'r', 'r-2', 33)]),
      { actor: 'test' },
    );
    expect(calls.appendMany).toBe(1);
    expect(outcomes.map((o) => o.status)).toEqual(['recorded', 'recorded', 'recorded']);
    const s = await streams(513);
    expect(s.r).toEqual(['MessageRecorded r-other', 'MessageRecorded r-1', 'MessageRecorded r-2']);
    expect(s.s).toEqual(['MessageRecorded s-1']);
  });

  it('another writer stored exactly one conversation\'s events meanwhile: its lines are unchanged, the others recorded', async () => {
    const lines = parse([record(513, 'p', 'p-1', 10), record(513, 'q', 'q-1', 11), record(513, 'p', 'p-2', 12)]);
    const other = new ConversationRecorder(ctx.services);
    const { store, calls } = watchedStore(ctx.services.store, async () => {
      await other.record([lines[0], lines[2]], { actor: 'other' });
    });
    const { outcomes } = await new ConversationRecorder({ ...ctx.services, store }).record(lines, { actor: 'test' });
    expect(calls.appendMany).toBe(1);
    expect(outcomes.map((o) => o.status)).toEqual(['unchanged', 'recorded', 'unchanged']);
    const s = await streams(513);
    expect(s.p).toEqual(['MessageRecorded p-1', 'MessageRecorded p-2']);
    expect(s.q).toEqual(['MessageRecorded q-1']);
  });

  it('conversations the recorder knows from an earlier batch (one over 100 events) are brought up to date before deciding', async () => {
    const recorder = new ConversationRecorder(ctx.services);
    const long = Array.from({ length: 101 }, (_, i) => record(513, 'long', `l-${i}`, 40));
    const first = await recorder.record(
      parse([...long, record(513, 'short', 'h-1', 41), record(513, 'short', 'h-1', 41, { deleted: true }), record(513, 'short', 'h-1', 41)]),
      { actor: 'test' },
    );
    expect(first.outcomes.slice(-3).map((o) => o.status)).toEqual(['recorded', 'deleted', 'restored']);
    expect(first.outcomes.slice(0, -3).filter((o) => o.status !== 'recorded')).toEqual([]);
    // another writer deletes a message of each between the recorder's batches
    const other = await new ConversationRecorder(ctx.services).record(
      parse([record(513, 'long', 'l-5', 40, { deleted: true }), record(513, 'short', 'h-1', 41, { deleted: true })]),
      { actor: 'other' },
    );
    expect(other.outcomes.map((o) => o.status)).toEqual(['deleted', 'deleted']);
    const second = await recorder.record(
      parse([record(513, 'long', 'l-5', 40), record(513, 'short', 'h-1', 41), record(513, 'long', 'l-101', 42), record(513, 'short', 'h-2', 43)]),
      { actor: 'test' },
    );
    expect(second.outcomes.map((o) => o.status)).toEqual(['restored', 'restored', 'recorded', 'recorded']);
    const s = await streams(513);
    expect(s.long).toHaveLength(104);
    expect(s.long.slice(-3)).toEqual(['MessageDeleted l-5', 'MessageRestored l-5', 'MessageRecorded l-101']);
    expect(s.short).toEqual([
      'MessageRecorded h-1', 'MessageDeleted h-1', 'MessageRestored h-1', 'MessageDeleted h-1', 'MessageRestored h-1', 'MessageRecorded h-2',
    ]);
    // its second restore, named so (a state that counted the first deletion and restore twice would name it the third)
    const restored = await ctx.services.pool.query<{ event_id: string }>(
      `SELECT event_id::text FROM es.events WHERE stream_id = 'conversation-513-short' AND stream_revision = 4`,
    );
    expect(restored.rows[0].event_id).toBe(conversationEventId(513, 'short', 'h-1', 'MessageRestored', 2));
  });

  it('an event the store refuses for its schema in one conversation: that line is rejected, the rest of the batch recorded', async () => {
    const lines = parse([record(513, 'u', 'u-1', 20), record(513, 'v', 'v-1', 21), record(513, 'u', 'u-2', 22), record(513, 'v', 'v-2', 23)]);
    // what an unchecked year past 9999 used to become: not an RFC 3339 date-time, refused by the event schema
    lines[2] = { ...lines[2], occurredAt: '+010000-01-01T04:59:59.000Z' };
    const { outcomes } = await new ConversationRecorder(ctx.services).record(lines, { actor: 'test' });
    expect(outcomes).toEqual([
      { status: 'recorded' },
      { status: 'recorded' },
      { status: 'rejected', code: 'INVALID_EVENT', reason: expect.stringMatching(/^MessageRecorded does not match its schema/) },
      { status: 'recorded' },
    ]);
    const s = await streams(513);
    expect(s.u).toEqual(['MessageRecorded u-1']);
    expect(s.v).toEqual(['MessageRecorded v-1', 'MessageRecorded v-2']);
  });
});
