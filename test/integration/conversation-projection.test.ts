import { randomUUID } from 'node:crypto';
import { START, type Position } from '../../src/ports/event-store';
import { conversationsProjection } from '../../src/projections/conversations/projection';
import { checksumProjection, rebuildProjection } from '../../src/projections/rebuild';
import { catchUpConversations } from '../../src/commands/conversation/handler';
import { createTestContext, type TestContext } from '../support/services';
import { lastAppended, messageRecord, provisionCompany, recordMessages } from '../support/conversation-fixtures';

// The `conversations` read model: idempotent apply (every event delivered twice), a rebuild reproduces the
// live tables exactly (seq included), and late agent registration fills the agent's name in.

describe('conversations projection', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ runner: false });
    await provisionCompany(ctx.services, { companyId: 701, agents: [{ id: 7, name: 'Bot', version: '1.0' }], operators: [{ id: 9, name: 'Op' }] });
    await catchUpConversations(ctx.services, { until: lastAppended(ctx.services) });
    const outcomes = await recordMessages(ctx.services, [
      messageRecord({ companyId: 701, id: 'p-1', occurredAt: '2024-01-10T10:00:00Z' }),
      messageRecord({ companyId: 701, id: 'p-2', occurredAt: '2024-01-10T10:01:00Z', direction: 'outbound', author: { type: 'agent', agentId: 7 } }),
      messageRecord({ companyId: 701, id: 'p-3', occurredAt: '2024-01-10T10:02:00Z', deleted: true }),
      messageRecord({ companyId: 701, id: 'p-4', occurredAt: '2024-01-10T10:03:00Z', conversationId: 'other' }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['recorded', 'recorded', 'recorded', 'recorded']);
    await catchUpConversations(ctx.services, { until: lastAppended(ctx.services) });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('applying every event a second time changes nothing (rows, seq, reply stats)', async () => {
    const before = await checksumProjection(ctx.services.pool, conversationsProjection);
    const client = await ctx.services.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL search_path TO ${conversationsProjection.schema}, public`);
      let position: Position = START;
      for (;;) {
        const batch = await ctx.services.store.readAll(position, 500);
        if (batch.events.length === 0) break;
        for (const e of batch.events) if (conversationsProjection.handles.includes(e.type)) await conversationsProjection.apply(client, e);
        position = batch.nextPosition;
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await checksumProjection(ctx.services.pool, conversationsProjection)).toBe(before);
    const stats = await ctx.services.pool.query('SELECT inbound_count FROM rm_conversations.reply_stats WHERE company_id = 701');
    expect(stats.rows).toEqual([{ inbound_count: 3 }]);
    const seqs = await ctx.services.pool.query('SELECT message_id, seq::int FROM rm_conversations.messages ORDER BY seq');
    expect(seqs.rows).toEqual([
      { message_id: 'p-1', seq: 1 }, { message_id: 'p-2', seq: 2 }, { message_id: 'p-3', seq: 3 }, { message_id: 'p-4', seq: 4 },
    ]);
  });

  it('a rebuild reproduces the live tables exactly (seq is deterministic, so cursors survive it)', async () => {
    const live = await checksumProjection(ctx.services.pool, conversationsProjection);
    await rebuildProjection(ctx.services.pool, ctx.services.store, conversationsProjection, {});
    expect(await checksumProjection(ctx.services.pool, conversationsProjection)).toBe(live);
  });

  it('a message recorded before its agent is known gets the agent name and version when the agent registers', async () => {
    const meta = () => ({ eventId: randomUUID(), correlationId: randomUUID(), causationId: null, companyId: 702, actor: 'test', at: new Date().toISOString() });
    await ctx.services.store.append('company-702', [{ type: 'CompanyRegistered', metadata: meta(), data: {
      companyId: 702, name: 'x', email: 'x', phone: 'x', website: 'x', address: 'x', description: 'x', timezone: 'UTC', companySize: null, companyTypes: [], categories: [],
    } }], 'any');
    const recorded = await ctx.services.store.append('conversation-702-c', [{
      type: 'MessageRecorded', metadata: meta(), data: {
        companyId: 702, messageId: 'early', conversationId: 'c', occurredAt: '2024-01-10T10:00:00.000Z', channel: 'SOCIALMSG', direction: 'outbound',
        author: { type: 'agent', agentId: 70 }, contactPhone: null, content: { type: 'text', text: 'hi', mediaUrl: null, mediaMime: null },
        replyToMessageId: null, classifications: [], extractions: [], toolCalls: [], traceId: null,
      },
    }], 'no_stream');
    await catchUpConversations(ctx.services, { until: recorded.position });
    const row = () => ctx.services.pool.query('SELECT agent_name, agent_version FROM rm_conversations.messages WHERE company_id = 702');
    expect((await row()).rows).toEqual([{ agent_name: null, agent_version: null }]);
    const agent = await ctx.services.store.append('company-702', [{ type: 'AgentRegistered', metadata: meta(), data: { companyId: 702, agentId: 70, name: 'Late bot', version: '0.9' } }], 'any');
    await catchUpConversations(ctx.services, { until: agent.position });
    expect((await row()).rows).toEqual([{ agent_name: 'Late bot', agent_version: '0.9' }]);
  });
});
