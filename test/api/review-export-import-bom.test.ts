import { Readable } from 'node:stream';
import { importMessages, type ImportIo } from '../../src/cli/import-messages';
import { createTestApp } from '../support/services';
import { messageRecord, ndjson, provisionCompany, settle } from '../support/conversation-fixtures';

// Review (chat history in, export out): a file written by a tool that starts UTF-8 text with a byte-order mark.

const KEY = 'sbk_reviewexportbom0000000000000000000';

function io(): ImportIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, progress: false, stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } };
}

describe('export review: importing an NDJSON file that starts with a BOM', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2024-02-01T00:00:00Z') });
    await provisionCompany(t.services, { companyId: 611, keys: [KEY] });
    await settle(t.services);
  });
  afterAll(() => t.close());

  // readline keeps a UTF-8 byte-order mark on the first line (Notepad, PowerShell 5's `Out-File -Encoding utf8`)
  it('records the first line of a file that starts with a UTF-8 BOM', async () => {
    const lines = [
      messageRecord({ companyId: 611, id: 'bom-1', occurredAt: '2024-01-10T10:00:00.000Z' }),
      messageRecord({ companyId: 611, id: 'bom-2', occurredAt: '2024-01-10T10:01:00.000Z' }),
    ].map((l) => JSON.stringify(l));
    const out = io();
    const summary = await importMessages(t.services, Readable.from(Buffer.from(`\uFEFF${lines.join('\n')}\n`, 'utf8')), out);
    expect(out.err).toEqual([]);
    expect(summary).toEqual({ lines: 2, recorded: 2, unchanged: 0, rejected: 0 });
    const r = await t.app.inject({
      method: 'GET', url: '/api/v1/qualitative-export/messages', headers: { 'x-api-key': KEY },
      query: { company_id: '611', from: '2024-01-10', to: '2024-01-11' },
    });
    expect(r.statusCode).toBe(200);
    expect(ndjson(r.body)).toHaveLength(2);
  });
});
