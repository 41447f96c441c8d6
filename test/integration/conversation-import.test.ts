import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buildCli } from '../../src/cli';
import { importMessages, type ImportIo } from '../../src/cli/import-messages';
import { ConversationRecorder } from '../../src/commands/conversation/handler';
import { parseMessageRecord } from '../../src/commands/conversation/message-input';
import { findReplyStats } from '../../src/projections/conversations/queries';
import { createTestContext, TEST_ANON_SECRET, TEST_PEPPER, type TestContext } from '../support/services';
import { messageRecord, provisionCompany } from '../support/conversation-fixtures';

// `switchboard import-messages`: per-line rejections with line number and reason, valid lines around them
// recorded, idempotent re-import, deletions, summary and exit status.

function io(): ImportIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, progress: false, stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } };
}

const file = (lines: unknown[]) => Readable.from(lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');

async function rows(ctx: TestContext, companyId: number) {
  const r = await ctx.services.pool.query(
    'SELECT message_id, conversation_id, deleted, agent_name FROM rm_conversations.messages WHERE company_id = $1 ORDER BY occurred_at, message_id',
    [companyId],
  );
  return r.rows;
}

async function conversationEvents(ctx: TestContext) {
  const r = await ctx.services.pool.query<{ type: string; n: number }>(
    `SELECT type, count(*)::int AS n FROM es.events WHERE stream_id LIKE 'conversation-%' GROUP BY type ORDER BY type`,
  );
  return Object.fromEntries(r.rows.map((x) => [x.type, x.n]));
}

describe('import-messages', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    // the CLI runs without a projection runner of its own
    ctx = await createTestContext({ runner: false });
    await provisionCompany(ctx.services, { companyId: 501, agents: [{ id: 7, name: 'Bot', version: '3' }], operators: [{ id: 9, name: 'Op' }] });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const t = (m: number) => `2024-01-10T10:${String(m).padStart(2, '0')}:00.000Z`;
  const lines = [
    messageRecord({ companyId: 501, id: 'imp-1', occurredAt: t(1) }),
    '{"id": "broken", ',
    messageRecord({ companyId: 501, id: 'imp-3', occurredAt: t(3), channel: 'TELEGRAPH' as never }),
    { ...messageRecord({ companyId: 501, occurredAt: t(4) }), id: undefined },
    messageRecord({ companyId: 501, id: 'imp-5', occurredAt: t(5), direction: 'outbound', author: { type: 'agent', agentId: 99 } }),
    '',
    messageRecord({ companyId: 501, id: 'imp-7', occurredAt: t(7), direction: 'outbound', author: { type: 'agent', agentId: 7 } }),
    messageRecord({ companyId: 999, id: 'imp-8', occurredAt: t(8) }),
    messageRecord({ companyId: 501, id: 'imp-9', occurredAt: t(9), direction: 'outbound', author: { type: 'human_operator', operatorId: 9 } }),
    messageRecord({ companyId: 501, id: 'imp-10', occurredAt: t(10), direction: 'outbound', author: { type: 'human_operator', operatorId: 10 } }),
    messageRecord({ companyId: 501, id: 'imp-11', occurredAt: t(11), direction: 'outbound' }),
    messageRecord({ companyId: 501, id: 'imp-12', occurredAt: t(12), contactPhone: '12' }),
    messageRecord({ companyId: 501, id: 'imp-1', occurredAt: t(1) }), // the same id again in the same file
    messageRecord({ companyId: 501, id: 'imp-14', occurredAt: t(14), conversationId: 'real-conv-2', deleted: true }),
  ];

  it('rejects invalid lines one by one with line number and reason, and records the valid ones around them', async () => {
    const out = io();
    const summary = await importMessages(ctx.services, file(lines), out, { batchSize: 4 });
    expect(summary).toEqual({ lines: 13, recorded: 4, unchanged: 1, rejected: 8 });
    expect(out.out).toEqual(['recorded 4, unchanged 1, rejected 8\n']);
    const err = out.err.join('').split('\n').filter(Boolean);
    expect(err).toEqual([
      expect.stringMatching(/^line 2: rejected: invalid JSON/),
      expect.stringMatching(/^line 3: rejected: channel: must be one of PROVIDER_MSGAPP, /),
      expect.stringMatching(/^line 4: rejected: id: /),
      'line 5: rejected: UNKNOWN_AGENT: author agent 99 is not an agent of company 501',
      'line 8: rejected: UNKNOWN_COMPANY: company 999 is not known',
      'line 10: rejected: UNKNOWN_OPERATOR: author operator 10 is not an operator of company 501',
      'line 11: rejected: DIRECTION_MISMATCH: a message authored by a contact must be inbound',
      'line 12: rejected: contactPhone: is not a valid phone number (2 characters, 2 digits)',
    ]);
    // recorded and visible in the read model (the CLI catches the read model up before it exits)
    expect(await rows(ctx, 501)).toEqual([
      { message_id: 'imp-1', conversation_id: 'real-conv-1', deleted: false, agent_name: null },
      { message_id: 'imp-7', conversation_id: 'real-conv-1', deleted: false, agent_name: 'Bot' },
      { message_id: 'imp-9', conversation_id: 'real-conv-1', deleted: false, agent_name: null },
      { message_id: 'imp-14', conversation_id: 'real-conv-2', deleted: true, agent_name: null },
    ]);
    expect(await conversationEvents(ctx)).toEqual({ MessageRecorded: 4, MessageDeleted: 1 });
  });

  it('is idempotent: importing the same file again records nothing', async () => {
    const out = io();
    const summary = await importMessages(ctx.services, file(lines), out);
    expect(summary).toEqual({ lines: 13, recorded: 0, unchanged: 5, rejected: 8 });
    expect(out.out).toEqual(['recorded 0, unchanged 5, rejected 8\n']);
    expect(await conversationEvents(ctx)).toEqual({ MessageRecorded: 4, MessageDeleted: 1 });
  });

  it('a record that now says deleted deletes the message; the original again (deleted: false) restores it', async () => {
    const out = io();
    const deleted = await importMessages(ctx.services, file([messageRecord({ companyId: 501, id: 'imp-7', occurredAt: t(7), direction: 'outbound', author: { type: 'agent', agentId: 7 }, deleted: true })]), out);
    expect(deleted).toEqual({ lines: 1, recorded: 1, unchanged: 0, rejected: 0 });
    expect((await rows(ctx, 501)).find((r) => r.message_id === 'imp-7')).toMatchObject({ deleted: true });
    const again = await importMessages(ctx.services, file([lines[6]]), io());
    expect(again).toEqual({ lines: 1, recorded: 1, unchanged: 0, rejected: 0 });
    expect((await rows(ctx, 501)).find((r) => r.message_id === 'imp-7')).toMatchObject({ deleted: false });
    expect(await conversationEvents(ctx)).toEqual({ MessageRecorded: 4, MessageDeleted: 2, MessageRestored: 1 });
  });

  it('a message id already recorded in another conversation of the company is rejected', async () => {
    const out = io();
    const s = await importMessages(ctx.services, file([messageRecord({ companyId: 501, id: 'imp-1', conversationId: 'real-conv-other', occurredAt: t(1) })]), out);
    expect(s.rejected).toBe(1);
    expect(out.err.join('')).toContain('line 1: rejected: DUPLICATE_MESSAGE_ID');
  });

  it('sees provisioning that happened just before (the directory read model is caught up before rejecting)', async () => {
    await provisionCompany(ctx.services, { companyId: 502, agents: [{ id: 70, name: 'New bot', version: '1' }] });
    // no runner: nothing has applied these events yet
    const s = await importMessages(ctx.services, file([messageRecord({ companyId: 502, id: 'new-1', direction: 'outbound', author: { type: 'agent', agentId: 70 } })]), io());
    expect(s).toEqual({ lines: 1, recorded: 1, unchanged: 0, rejected: 0 });
    expect(await rows(ctx, 502)).toEqual([{ message_id: 'new-1', conversation_id: 'real-conv-1', deleted: false, agent_name: 'New bot' }]);
  });

  it('keeps the reply stats of contacts from inbound messages (once per message)', async () => {
    const stats = await findReplyStats(ctx.services.pool, 501, ['+5491122334455', '+541122334455']);
    // imp-1 (inbound) and imp-14 (inbound, later deleted: the contact did reply)
    expect(stats).toEqual({
      contactPhone: '+5491122334455', firstReplyAt: new Date(t(1)), lastReplyAt: new Date(t(14)), inboundCount: 2,
    });
    expect(await findReplyStats(ctx.services.pool, 501, ['+5491100000099'])).toBeUndefined();
  });

  it('recorders sharing a stream see each other\'s appends: a message recorded by one is unchanged for the other', async () => {
    const m = parseMessageRecord(messageRecord({ companyId: 501, id: 'race-1', conversationId: 'race', occurredAt: t(30) }));
    if (!m.ok) throw new Error(m.reason);
    const a = new ConversationRecorder(ctx.services);
    const b = new ConversationRecorder(ctx.services);
    // b folds the (empty) stream first, then a records, then b records the same message
    expect((await b.record([{ ...m.message, messageId: 'race-0' }], { actor: 'test' })).outcomes).toEqual([{ status: 'recorded' }]);
    expect((await a.record([m.message], { actor: 'test' })).outcomes).toEqual([{ status: 'recorded' }]);
    expect((await b.record([m.message], { actor: 'test' })).outcomes).toEqual([{ status: 'unchanged' }]);
    const n = await ctx.services.pool.query(`SELECT count(*)::int AS n FROM es.events WHERE stream_id = 'conversation-501-race'`);
    expect(n.rows[0].n).toBe(2);
  });

  it('switchboard import-messages FILE: the real command, its summary on stdout and exit status 1 on rejections', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-import-'));
    const path = join(dir, 'messages.ndjson');
    writeFileSync(path, [JSON.stringify(messageRecord({ companyId: 501, id: 'cli-1', occurredAt: t(40) })), '{oops'].join('\n'));
    const saved = { ...process.env };
    const out: string[] = [];
    const err: string[] = [];
    const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((s: any) => (out.push(String(s)), true));
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((s: any) => (err.push(String(s)), true));
    Object.assign(process.env, {
      DATABASE_URL: ctx.db.url, ANONYMIZATION_SECRET: TEST_ANON_SECRET, API_KEY_PEPPER: TEST_PEPPER, LOG_LEVEL: 'silent', KAFKA_BROKERS: '',
    });
    // the command exits with the status itself once stopped (an exit hook of the embedded Postgres would make it 0)
    const exit = jest.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
    try {
      await buildCli().exitOverride().parseAsync(['node', 'switchboard', 'import-messages', path]);
      expect(process.exitCode).toBe(1);
      expect(exit).toHaveBeenCalledWith(1);
    } finally {
      exit.mockRestore();
      process.exitCode = undefined;
      stdout.mockRestore();
      stderr.mockRestore();
      process.env = saved;
      rmSync(dir, { recursive: true, force: true });
    }
    expect(out.join('')).toBe('recorded 1, unchanged 0, rejected 1\n');
    expect(err.join('')).toMatch(/^line 2: rejected: invalid JSON/);
    expect((await rows(ctx, 501)).map((r) => r.message_id)).toContain('cli-1');
  });

  it('the command refuses an unreadable file before starting anything', async () => {
    const cli = buildCli().exitOverride();
    await expect(cli.parseAsync(['node', 'switchboard', 'import-messages', '/nonexistent/messages.ndjson'])).rejects.toThrow(
      'cannot read /nonexistent/messages.ndjson: no such file',
    );
  });
});
