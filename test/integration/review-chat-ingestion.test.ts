import { Readable } from 'node:stream';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { importMessages, type ImportIo } from '../../src/cli/import-messages';
import { catchUpConversations } from '../../src/commands/conversation/handler';
import { parseMessageRecord } from '../../src/commands/conversation/message-input';
import { startConversationConsumer } from '../../src/workers/conversation-consumer';
import { createTestContext, type TestContext } from '../support/services';
import { messageRecord, provisionCompany, recordMessages, settle } from '../support/conversation-fixtures';

// Review of chat-message ingestion against contracts/conversation-messages.md: the same records give the same
// read model via `import-messages` and via `conversation.messages`, ids are kept as the platform wrote them, and a
// valid record never blocks the partition.

function io(): ImportIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, progress: false, stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } };
}

const file = (lines: unknown[]) => Readable.from(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

async function rows(ctx: TestContext, companyId: number) {
  const r = await ctx.services.pool.query<{ message_id: string; conversation_id: string; deleted: boolean }>(
    'SELECT message_id, conversation_id, deleted FROM rm_conversations.messages WHERE company_id = $1 ORDER BY message_id',
    [companyId],
  );
  return r.rows;
}

describe('review: chat ingestion, import-messages (no projection runner, as the CLI)', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ runner: false });
    for (const companyId of [701, 702, 703, 704]) await provisionCompany(ctx.services, { companyId });
    await catchUpConversations(ctx.services);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('one id in two conversations: the later line is rejected, as on Kafka, whatever the batch grouping', async () => {
    // line 1 and 3 are one conversation, line 2 another; records are decided per stream, but the contract's
    // "the first wins" is the first line, so line 3 (not line 2) is the duplicate
    const lines = [
      messageRecord({ companyId: 701, id: 'dup-a', conversationId: 'conv-1', occurredAt: '2024-01-10T10:01:00Z' }),
      messageRecord({ companyId: 701, id: 'dup-x', conversationId: 'conv-2', occurredAt: '2024-01-10T10:02:00Z' }),
      messageRecord({ companyId: 701, id: 'dup-x', conversationId: 'conv-1', occurredAt: '2024-01-10T10:03:00Z' }),
    ];
    const out = io();
    const summary = await importMessages(ctx.services, file(lines), out);
    expect(out.err.join('')).toMatch(/^line 3: rejected: DUPLICATE_MESSAGE_ID/);
    expect(summary).toEqual({ lines: 3, recorded: 2, unchanged: 0, rejected: 1 });
    expect(await rows(ctx, 701)).toEqual([
      { message_id: 'dup-a', conversation_id: 'conv-1', deleted: false },
      { message_id: 'dup-x', conversation_id: 'conv-2', deleted: false },
    ]);
  });

  it('one id in two conversations across import batches: the later line is rejected, not silently dropped', async () => {
    const lines = [
      messageRecord({ companyId: 702, id: 'xb-1', conversationId: 'conv-1', occurredAt: '2024-01-10T10:01:00Z' }),
      messageRecord({ companyId: 702, id: 'xb-1', conversationId: 'conv-2', occurredAt: '2024-01-10T10:02:00Z' }),
    ];
    const out = io();
    const summary = await importMessages(ctx.services, file(lines), out, { batchSize: 1 });
    expect(out.err.join('')).toMatch(/^line 2: rejected: DUPLICATE_MESSAGE_ID/);
    expect(summary).toEqual({ lines: 2, recorded: 1, unchanged: 0, rejected: 1 });
    const events = await ctx.services.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM es.events WHERE stream_id LIKE 'conversation-702-%' AND type = 'MessageRecorded'`,
    );
    expect(events.rows[0].n).toBe(1);
  });

  it('ids are read without the blanks around them, replies too: an id with spaces is the same id, and a reply to it stays linked', async () => {
    const parsed = parseMessageRecord(messageRecord({ companyId: 703, id: ' sp-1 ', conversationId: ' conv-1', replyToMessageId: ' sp-0 ' }));
    expect(parsed.ok && [parsed.message.messageId, parsed.message.conversationId, parsed.message.replyToMessageId]).toEqual(['sp-1', 'conv-1', 'sp-0']);
    const lines = [
      messageRecord({ companyId: 703, id: 'sp-1', conversationId: 'conv-1', occurredAt: '2024-01-10T10:01:00Z' }),
      messageRecord({ companyId: 703, id: ' sp-1 ', conversationId: 'conv-1', occurredAt: '2024-01-10T10:02:00Z' }),
      messageRecord({ companyId: 703, id: 'sp-3', conversationId: 'conv-1', occurredAt: '2024-01-10T10:03:00Z', replyToMessageId: ' sp-1 ' }),
    ];
    const summary = await importMessages(ctx.services, file(lines), io());
    expect(summary).toEqual({ lines: 3, recorded: 2, unchanged: 1, rejected: 0 });
    expect((await rows(ctx, 703)).map((r) => r.message_id)).toEqual(['sp-1', 'sp-3']);
    const link = await ctx.services.pool.query(
      `SELECT r.message_id FROM rm_conversations.messages r JOIN rm_conversations.messages m
          ON m.company_id = r.company_id AND m.message_id = r.reply_to_message_id WHERE r.company_id = 703`,
    );
    expect(link.rows).toEqual([{ message_id: 'sp-3' }]);
    // an id that is only blanks is still missing
    const blank = parseMessageRecord(messageRecord({ companyId: 703, id: '   ' }));
    expect(blank).toEqual({ ok: false, reason: 'id: is missing' });
  });

  it('ids with a colon: two different messages are both recorded (event ids do not collide)', async () => {
    // message "b:c" of conversation "a" and message "c" of conversation "a:b"
    const outcomes = [
      ...(await recordMessages(ctx.services, [messageRecord({ companyId: 704, id: 'c', conversationId: 'a:b', occurredAt: '2024-01-10T10:01:00Z' })])),
      ...(await recordMessages(ctx.services, [messageRecord({ companyId: 704, id: 'b:c', conversationId: 'a', occurredAt: '2024-01-10T10:02:00Z' })])),
    ];
    expect(outcomes).toEqual([{ status: 'recorded' }, { status: 'recorded' }]);
    await catchUpConversations(ctx.services);
    expect(await rows(ctx, 704)).toEqual([
      { message_id: 'b:c', conversation_id: 'a', deleted: false },
      { message_id: 'c', conversation_id: 'a:b', deleted: false },
    ]);
  });

  it('refuted: agent as it was, deletion before the original (the original restores it: the latest record decides), one id in two companies', async () => {
    await provisionCompany(ctx.services, { companyId: 705, agents: [{ id: 3, name: 'Sofia', version: '1.0' }] });
    await provisionCompany(ctx.services, { companyId: 706 });
    await catchUpConversations(ctx.services);
    const bot = (id: string, m: string) => messageRecord({
      companyId: 705, id, conversationId: 'c', occurredAt: `2024-01-10T10:${m}:00Z`, direction: 'outbound', author: { type: 'agent', agentId: 3 }, contactPhone: null,
    });
    await importMessages(ctx.services, file([bot('v1-msg', '01')]), io());
    await ctx.services.store.append('company-705', [{
      type: 'AgentChanged', data: { companyId: 705, agentId: 3, name: 'Sofia', version: '2.0' },
      metadata: { eventId: '0b4a3c1e-0000-4000-8000-000000000705', correlationId: 'x', causationId: null, companyId: 705, actor: 'test', at: new Date().toISOString() },
    }], 'any');
    const later = messageRecord({ companyId: 706, id: 'v1-msg', conversationId: 'c', occurredAt: '2024-01-10T10:05:00Z' });
    const summary = await importMessages(ctx.services, file([
      bot('v2-msg', '02'), bot('v1-msg', '01'), { ...bot('gone', '03'), deleted: true }, bot('gone', '03'), later,
    ]), io());
    expect(summary).toEqual({ lines: 5, recorded: 4, unchanged: 1, rejected: 0 });
    const r = await ctx.services.pool.query(
      `SELECT company_id, message_id, agent_version, deleted FROM rm_conversations.messages WHERE company_id IN (705, 706) ORDER BY company_id, message_id`,
    );
    expect(r.rows).toEqual([
      { company_id: 705, message_id: 'gone', agent_version: '2.0', deleted: false },
      { company_id: 705, message_id: 'v1-msg', agent_version: '1.0', deleted: false },
      { company_id: 705, message_id: 'v2-msg', agent_version: '2.0', deleted: false },
      { company_id: 706, message_id: 'v1-msg', agent_version: null, deleted: false },
    ]);
  });

});

describe('review: chat ingestion, conversation.messages (in-process transport)', () => {
  let ctx: TestContext;
  let transport: InProcessTransport;
  beforeAll(async () => {
    transport = new InProcessTransport({ retryDelayMs: 1 });
    ctx = await createTestContext({ transport });
    await provisionCompany(ctx.services, { companyId: 711 });
    await settle(ctx.services);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('a valid record whose ids contain colons is recorded, not retried for ever (the partition would block)', async () => {
    const consumer = await startConversationConsumer(ctx.services);
    try {
      await ctx.services.transport.publish('conversation.messages', [
        { key: '711', value: messageRecord({ companyId: 711, id: 'c', conversationId: 'a:b', occurredAt: '2024-01-10T10:01:00Z' }) },
      ]);
      await expect(ctx.services.transport.publish('conversation.messages', [
        { key: '711', value: messageRecord({ companyId: 711, id: 'b:c', conversationId: 'a', occurredAt: '2024-01-10T10:02:00Z' }) },
        { key: '711', value: messageRecord({ companyId: 711, id: 'after', conversationId: 'a', occurredAt: '2024-01-10T10:03:00Z' }) },
      ])).resolves.toBeUndefined();
      await settle(ctx.services);
      expect((await rows(ctx, 711)).map((r) => r.message_id)).toEqual(['after', 'b:c', 'c']);
      expect(transport.deadLetters).toEqual([]);
    } finally {
      await consumer.stop();
    }
  });

  it('the same records as the import test give the same outcome: the later line is the duplicate', async () => {
    const consumer = await startConversationConsumer(ctx.services);
    try {
      await ctx.services.transport.publish('conversation.messages', [
        { key: '711', value: messageRecord({ companyId: 711, id: 'dup-a', conversationId: 'conv-1', occurredAt: '2024-01-10T10:01:00Z' }) },
        { key: '711', value: messageRecord({ companyId: 711, id: 'dup-x', conversationId: 'conv-2', occurredAt: '2024-01-10T10:02:00Z' }) },
      ]);
      await settle(ctx.services);
      await ctx.services.transport.publish('conversation.messages', [
        { key: '711', value: messageRecord({ companyId: 711, id: 'dup-x', conversationId: 'conv-1', occurredAt: '2024-01-10T10:03:00Z' }) },
      ]);
      await settle(ctx.services);
      expect((await rows(ctx, 711)).filter((r) => r.message_id.startsWith('dup-'))).toEqual([
        { message_id: 'dup-a', conversation_id: 'conv-1', deleted: false },
        { message_id: 'dup-x', conversation_id: 'conv-2', deleted: false },
      ]);
      expect(transport.deadLetters.map((d) => d.reason)).toEqual([expect.stringMatching(/^DUPLICATE_MESSAGE_ID: /)]);
    } finally {
      await consumer.stop();
    }
  });
});
