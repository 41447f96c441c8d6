import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type CliProcess, runCli, startServeOnAnyPort } from '../support/cli-process';
import { describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// SIGTERM while an export page streams to a client that has stopped reading: the stop waits for the page up to the
// HTTP drain deadline (20 s), then ends its connection and goes on with the rest of the graceful stop (workers,
// runner, pools): exit 0. Before, the stalled page held the stop until the forced exit at 30 s (code 1), so the
// workers never stopped gracefully. The client finds the body cut where HTTP says so (chunked, no last chunk).

const FIXTURE = join(ROOT, 'test/fixtures/example-fixture.json');
const ROWS = 4000;
const TIMEOUT = 240_000;

const d = describeWithBuiltCli('shutdown export suite');

d('serve: SIGTERM during an export stream read by a stalled client (built CLI)', () => {
  let db: TestDatabase;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let url: string;
  let serve: CliProcess | undefined;

  const cli = (...args: string[]) => runCli(env, args, { maxBuffer: 1 << 26 });

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-export-review4-'));
    env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'info' });
    cli('seed', FIXTURE);
    const text = 'x'.repeat(4000); // 4,000 lines of ~4 KB: a page far larger than the sockets' buffers
    const lines = Array.from({ length: ROWS }, (_, i) => JSON.stringify({
      id: `shutdown-msg-${i}`, companyId: 101, conversationId: 'shutdown-conv', occurredAt: new Date(Date.UTC(2024, 0, 1) + i * 1000).toISOString(),
      channel: 'PROVIDER_MSGAPP', direction: 'outbound', author: { type: 'system' }, contactPhone: null,
      content: { type: 'text', text, mediaUrl: null, mediaMime: null }, replyToMessageId: null,
      classifications: [], extractions: [], toolCalls: [], traceId: null, deleted: false,
    }));
    writeFileSync(join(dataDir, 'messages.ndjson'), lines.join('\n') + '\n');
    cli('import-messages', join(dataDir, 'messages.ndjson'));
  }, TIMEOUT);

  afterAll(async () => {
    await serve?.kill();
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('the stalled page is cut at the drain deadline and the rest of the stop runs (exit 0); the client sees no last chunk', async () => {
    const apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e export').trim();
    // on a port the system picks as it binds, its URL read from what it prints (a port found free first could be
    // taken before the child bound it)
    ({ serve, url } = await startServeOnAnyPort(env));

    const client = connect(Number(new URL(url).port), '127.0.0.1');
    await new Promise((ok) => client.once('connect', ok));
    const chunks: Buffer[] = [];
    const closed = new Promise((ok) => client.once('close', ok));
    client.on('error', () => undefined);
    client.write(`GET /api/v1/qualitative-export/messages?company_id=101&from=2024-01-01&to=2024-01-20&limit=${ROWS} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${apiKey}\r\n\r\n`);
    const first = await new Promise<Buffer>((ok) => client.once('data', ok));
    chunks.push(first);
    client.pause(); // the client stops reading: the page cannot finish
    expect(first.toString('latin1')).toMatch(/^HTTP\/1\.1 200 OK\r\n(.*\r\n)*transfer-encoding: chunked\r\n/i);

    expect(await serve.stop('SIGTERM')).toBe(0);
    expect(serve.output()).toMatch(/"ms":20000,"msg":"HTTP requests still running at the drain deadline: closing their connections"/);
    expect(serve.output()).not.toMatch(/shutdown took too long/);

    client.on('data', (c: Buffer) => chunks.push(c));
    client.resume();
    await closed;
    const body = Buffer.concat(chunks).toString('latin1');
    expect(body.endsWith('\r\n0\r\n\r\n')).toBe(false); // no last chunk: any HTTP client reports the body as cut
    const lines = body.split('\r\n\r\n').slice(1).join('').split('\n').length;
    expect(lines).toBeLessThan(ROWS); // cut before the page's end
  }, TIMEOUT);
});
