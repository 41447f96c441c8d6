import { Readable } from 'node:stream';
import { importMessages, type ImportIo } from '../../src/cli/import-messages';
import { catchUpConversations } from '../../src/commands/conversation/handler';
import { createTestContext, type TestContext } from '../support/services';
import { messageRecord, provisionCompany } from '../support/conversation-fixtures';

// Regression hunt (3a28f04, "ids are kept as written (were trimmed)"): a record stored before that change with blanks
// around its id or conversation id was stored trimmed. The same record delivered again (a Kafka redelivery, the same
// file imported again) is now another message in another conversation: the export holds it twice.

function io(): ImportIo & { err: string[] } {
  const err: string[] = [];
  return { err, progress: false, stdout: { write: () => true }, stderr: { write: (s: string) => err.push(s) } } as ImportIo & { err: string[] };
}
const file = (lines: unknown[]) => Readable.from(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

describe('regress-a: a record stored trimmed before today, delivered again as written', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ runner: false });
    await provisionCompany(ctx.services, { companyId: 931 });
    await catchUpConversations(ctx.services);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('is recognised (unchanged), not appended as a second message', async () => {
    const raw = messageRecord({ companyId: 931, id: ' ws-1 ', conversationId: ' conv-1', occurredAt: '2024-01-10T10:01:00Z' });
    // what the version before stored for that line: the ids trimmed (its event ids had no ':' either, so they are
    // those the current code gives the trimmed ids)
    await importMessages(ctx.services, file([{ ...raw, id: 'ws-1', conversationId: 'conv-1' }]), io());

    const summary = await importMessages(ctx.services, file([raw]), io());
    await catchUpConversations(ctx.services);

    const rows = await ctx.services.pool.query(
      'SELECT message_id, conversation_id FROM rm_conversations.messages WHERE company_id = 931 ORDER BY message_id',
    );
    expect(summary).toEqual({ lines: 1, recorded: 0, unchanged: 1, rejected: 0 });
    expect(rows.rows).toEqual([{ message_id: 'ws-1', conversation_id: 'conv-1' }]);
  });
});
