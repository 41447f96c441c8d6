import { Readable } from 'node:stream';
import { importMessages, type ImportIo } from '../../src/cli/import-messages';
import { catchUpConversations } from '../../src/commands/conversation/handler';
import { lockKeyOf } from '../../src/projections/store';
import { createTestContext, type TestContext } from '../support/services';
import { messageRecord, provisionCompany } from '../support/conversation-fixtures';

// Review 6: the warning of an import whose read model could not catch up said `warning: ...`, the one line of
// stderr without the CLI's `switchboard:` form (docs/install.md); it now names the cause and what follows.

function io(): ImportIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, progress: false, stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } };
}

describe('import-messages: the catch-up warning (review 6)', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ runner: false });
    await provisionCompany(ctx.services, { companyId: 961 });
    await catchUpConversations(ctx.services);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('a read model held elsewhere past the wait: one `switchboard: warning:` line; the messages are recorded', async () => {
    const other = await ctx.services.pool.connect(); // another process's batch of the conversations projection
    try {
      await other.query('SELECT pg_advisory_lock(hashtext($1))', [lockKeyOf('conversations')]);
      const out = io();
      const input = Readable.from(`${JSON.stringify(messageRecord({ companyId: 961, id: 'warn-1' }))}\n`);
      const summary = await importMessages(ctx.services, input, out, { catchUpMs: 200 });
      expect(summary).toEqual({ lines: 1, recorded: 1, unchanged: 0, rejected: 0 });
      expect(out.out).toEqual(['recorded 1, unchanged 0, rejected 0\n']);
      expect(out.err).toHaveLength(1);
      expect(out.err[0]).toMatch(
        /^switchboard: warning: the conversations read model has not caught up yet \(.+\); the export and the contact lookup show the imported messages once it has \(`switchboard projections status` shows its lag\)\n$/,
      );
    } finally {
      await other.query('SELECT pg_advisory_unlock_all()');
      other.release();
    }
  });
});
