import { catchUpConversations, ConversationRecorder } from '../../src/commands/conversation/handler';
import { parseMessageRecord } from '../../src/commands/conversation/message-input';
import type { MessageToRecord } from '../../src/commands/conversation/decider';
import type { EventStore } from '../../src/ports/event-store';
import { createTestContext, type TestContext } from '../support/services';
import { messageRecord, provisionCompany } from '../support/conversation-fixtures';

// Regression hunt (503bc92, MessageRestored): a recorder whose state of a stream is taken just before another writer
// deletes and restores the message, then records the latest record (deleted: true), decides the FIRST deletion:
// its event id is stored, so the append is "already appended" and the record is answered unchanged. The message
// stays restored although the latest record deleted it. Before restores existed, deletion was final and the same
// race ended deleted.

const parse = (r: ReturnType<typeof messageRecord>): MessageToRecord => {
  const p = parseMessageRecord(r);
  if (!p.ok) throw new Error(p.reason);
  return p.message;
};

describe('regress-a: a deletion racing a delete + restore by another writer', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ runner: false });
    await provisionCompany(ctx.services, { companyId: 932 });
    await catchUpConversations(ctx.services);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('the latest record (deleted) decides', async () => {
    const base = messageRecord({ companyId: 932, id: 'race-1', conversationId: 'c', occurredAt: '2024-01-10T10:01:00Z' });
    const other = new ConversationRecorder(ctx.services);
    await other.record([parse(base)], { actor: 'test' });

    // the other writer deletes and restores the message between this recorder's read of the stream and its append
    let injected = false;
    const store: EventStore = Object.create(ctx.services.store);
    store.append = async (...args: Parameters<EventStore['append']>) => {
      if (!injected) {
        injected = true;
        await other.record([parse({ ...base, deleted: true })], { actor: 'test' });
        await other.record([parse(base)], { actor: 'test' });
      }
      return ctx.services.store.append(...args);
    };
    const recorder = new ConversationRecorder({ ...ctx.services, store });
    const { outcomes } = await recorder.record([parse({ ...base, deleted: true })], { actor: 'test' });
    await catchUpConversations(ctx.services);

    const types = await ctx.services.pool.query<{ type: string }>(
      `SELECT type FROM es.events WHERE stream_id = 'conversation-932-c' ORDER BY stream_revision`,
    );
    const row = await ctx.services.pool.query('SELECT deleted FROM rm_conversations.messages WHERE company_id = 932 AND message_id = $1', ['race-1']);
    expect({ outcomes, types: types.rows.map((r) => r.type), row: row.rows }).toEqual({
      outcomes: [{ status: 'deleted' }],
      types: ['MessageRecorded', 'MessageDeleted', 'MessageRestored', 'MessageDeleted'],
      row: [{ deleted: true }],
    });
  });
});
