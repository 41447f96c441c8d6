import { Readable } from 'node:stream';
import { importMessages, type ImportIo } from '../../src/cli/import-messages';
import type { MessageRecordInput } from '../../src/commands/conversation/message-input';
import { anonymizeId } from '../../src/shared/anonymize';
import { createTestApp, TEST_ANON_SECRET } from '../support/services';
import { issueKey, messageRecord, ndjson, provisionCompany, recordMessages, settle } from '../support/conversation-fixtures';

// contracts/conversation-messages.md: a record with an id already recorded is a no-op unless `deleted` changes.
// A record with `deleted: false` for a deleted message restores it (MessageRestored): it is exported again, with
// the content and time of its first record (docs/export.md, "The latest record decides").

const GLOBAL = 'sbk_global_chatrestore0000000000000000';
const COMPANY = 131;
const at = (m: number) => `2024-01-10T10:${String(m).padStart(2, '0')}:00.000Z`;
const edited = { type: 'text', text: 'edited later', mediaUrl: null, mediaMime: null } as const;

type TestApp = Awaited<ReturnType<typeof createTestApp>>;

function io(): ImportIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, progress: false, stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } };
}

describe('chat messages: a deleted message is restored by a later record with deleted: false', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
    await provisionCompany(t.services, { companyId: COMPANY });
    await issueKey(t.services, GLOBAL, null);
    await settle(t.services);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function exported(query: Record<string, string> = {}) {
    const res = await t.app.inject({
      method: 'GET',
      url: '/api/v1/qualitative-export/messages',
      query: { company_id: String(COMPANY), from: '2024-01-01T00:00:00Z', to: '2024-01-31T00:00:00Z', ...query },
      headers: { 'x-api-key': GLOBAL },
    });
    expect(res.statusCode).toBe(200);
    return ndjson(res.body);
  }
  const mid = (id: string) => anonymizeId(TEST_ANON_SECRET, COMPANY, 'message', id);
  const exportedIds = async () => (await exported()).filter((l) => l.message_id).map((l) => l.message_id);

  async function record(records: MessageRecordInput[]) {
    const outcomes = await recordMessages(t.services, records);
    await settle(t.services);
    return outcomes.map((o) => o.status);
  }

  async function events(messageId: string) {
    const r = await t.services.pool.query<{ type: string; event_id: string }>(
      `SELECT type, event_id::text FROM es.events WHERE stream_id LIKE $1 AND data->>'messageId' = $2 ORDER BY stream_revision`,
      [`conversation-${COMPANY}-%`, messageId],
    );
    return r.rows;
  }

  it('recorded, deleted, restored: exported again with the content and time of the first record', async () => {
    const original = messageRecord({ companyId: COMPANY, id: 'rs-1', occurredAt: at(1) });
    expect(await record([original])).toEqual(['recorded']);
    expect(await record([{ ...original, deleted: true }])).toEqual(['deleted']);
    expect(await exportedIds()).not.toContain(mid('rs-1'));

    // the restoring record carries other content and another time: content edits are not tracked
    expect(await record([{ ...original, occurredAt: at(2), content: edited, deleted: false }])).toEqual(['restored']);
    const line = (await exported()).find((l) => l.message_id === mid('rs-1'));
    expect(line).toMatchObject({ occurred_at: at(1), content: { type: 'text', text: 'hello', media_url: null, media_mime: null } });
    expect((await events('rs-1')).map((e) => e.type)).toEqual(['MessageRecorded', 'MessageDeleted', 'MessageRestored']);

    // the same record again is a no-op
    expect(await record([{ ...original, deleted: false }])).toEqual(['unchanged']);
    expect(await events('rs-1')).toHaveLength(3);
  });

  it('deleted again after a restore, and restored again: each change is a new event', async () => {
    const original = messageRecord({ companyId: COMPANY, id: 'rs-2', occurredAt: at(3) });
    expect(await record([original, { ...original, deleted: true }, original])).toEqual(['recorded', 'deleted', 'restored']);
    expect(await record([{ ...original, deleted: true }])).toEqual(['deleted']);
    expect(await exportedIds()).not.toContain(mid('rs-2'));
    expect(await record([original])).toEqual(['restored']);
    expect(await exportedIds()).toContain(mid('rs-2'));
    const stored = await events('rs-2');
    expect(stored.map((e) => e.type)).toEqual(['MessageRecorded', 'MessageDeleted', 'MessageRestored', 'MessageDeleted', 'MessageRestored']);
    expect(new Set(stored.map((e) => e.event_id)).size).toBe(5);
    expect(await record([original, { ...original, deleted: true }, { ...original, deleted: true }])).toEqual(['unchanged', 'deleted', 'unchanged']);
    expect(await exportedIds()).not.toContain(mid('rs-2'));
  });

  it('a message whose first record said deleted is recorded deleted, and a later record with deleted: false restores it', async () => {
    const first = messageRecord({ companyId: COMPANY, id: 'rs-3', occurredAt: at(4), deleted: true });
    expect(await record([first])).toEqual(['recorded']);
    expect(await exportedIds()).not.toContain(mid('rs-3'));
    expect(await record([{ ...first, deleted: false, occurredAt: at(5) }])).toEqual(['restored']);
    expect((await exported()).find((l) => l.message_id === mid('rs-3'))).toMatchObject({ occurred_at: at(4) });
  });

  it('the restored row keeps its seq (export cursors and the snapshot bound stay right)', async () => {
    const original = messageRecord({ companyId: COMPANY, id: 'rs-4', occurredAt: at(6) });
    await record([original]);
    const seq = async () =>
      (await t.services.pool.query('SELECT seq::text, deleted FROM rm_conversations.messages WHERE company_id = $1 AND message_id = $2', [COMPANY, 'rs-4'])).rows[0];
    const before = await seq();
    await record([{ ...original, deleted: true }]);
    await record([original]);
    expect(await seq()).toEqual({ seq: before.seq, deleted: false });
  });

  it('import-messages counts a restore as recorded', async () => {
    const original = messageRecord({ companyId: COMPANY, id: 'rs-5', occurredAt: at(7), deleted: true });
    const file = (lines: unknown[]) => Readable.from(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const out = io();
    const summary = await importMessages(t.services, file([original, { ...original, deleted: false }, { ...original, deleted: false }]), out);
    expect(summary).toEqual({ lines: 3, recorded: 2, unchanged: 1, rejected: 0 });
    await settle(t.services);
    expect(await exportedIds()).toContain(mid('rs-5'));
  });
});
