import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type CliProcess, runCli, startServeOnAnyPort } from '../support/cli-process';
import { describeWithBuiltCli, e2eServerEnv, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// SIGTERM while single sends wait on the provider (the built CLI, PROVIDER=cloud-api against a fake Graph API that
// answers only when the test says): every send in flight is answered 200 and its events are stored; a request that
// arrives on an open connection meanwhile is refused in the API's own error shape; the process exits 0.

const FIXTURE = join(ROOT, 'test/fixtures/example-fixture.json');
const PHONE_NUMBER_ID = '109876543210001';
const TIMEOUT = 180_000;

/** The outside provider: records each send and answers all of them when released. */
class HeldGraphApi {
  readonly ids: string[] = [];
  private held: Array<() => void> = [];
  private server!: Server;
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on('end', () => {
        const id = `wamid.DRAIN${String(this.ids.length + 1).padStart(4, '0')}`;
        this.ids.push(id);
        this.held.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ messages: [{ id }] })));
      });
    });
    await new Promise<void>((ok) => this.server.listen(0, '127.0.0.1', ok));
    this.port = (this.server.address() as { port: number }).port;
  }

  release(): void {
    for (const answer of this.held.splice(0)) answer();
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((ok) => this.server.close(() => ok()));
  }
}

/** Reads HTTP/1.1 responses off a raw socket (Content-Length bodies only, as these routes answer). */
function responsesOn(socket: Socket, count: number): Promise<Array<{ status: number; headers: string; body: string }>> {
  return new Promise((ok, fail) => {
    let raw = '';
    const parsed: Array<{ status: number; headers: string; body: string }> = [];
    const take = () => {
      while (parsed.length < count) {
        const end = raw.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = raw.slice(0, end);
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (raw.length < end + 4 + length) return;
        parsed.push({ status: Number(head.split(' ')[1]), headers: head.toLowerCase(), body: raw.slice(end + 4, end + 4 + length) });
        raw = raw.slice(end + 4 + length);
      }
      ok(parsed);
    };
    socket.on('data', (chunk) => {
      raw += chunk;
      take();
    });
    socket.on('close', () => fail(new Error(`connection closed after ${parsed.length} answers: ${raw}`)));
    socket.on('error', () => undefined);
  });
}

const d = describeWithBuiltCli('shutdown drain suite');

d('serve: SIGTERM with sends in flight (built CLI, cloud-api provider)', () => {
  let db: TestDatabase;
  let dataDir: string;
  const provider = new HeldGraphApi();
  let env: NodeJS.ProcessEnv;
  let url: string;
  let apiKey: string;
  let serve: CliProcess;

  const cli = (...args: string[]) => runCli(env, args);

  const sendBody = (n: number) => JSON.stringify({
    phone_number_id: PHONE_NUMBER_ID,
    template_name: 'appointment_reminder',
    recipient_phone: `+54911555501${String(n).padStart(2, '0')}`,
    variables: { patient_name: 'Juan', appointment_at: '2026-03-02T09:30:00-03:00' },
  });
  const rawSend = (n: number) => {
    const body = sendBody(n);
    return `POST /api/v1/platform-templates/send/ HTTP/1.1\r\nHost: x\r\nX-API-Key: ${apiKey}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };

  const waitFor = async (what: string, done: () => boolean) => {
    if (!(await serve.until(what, done))) throw new Error(`never saw ${what}: ${serve.output()}`);
  };

  beforeAll(async () => {
    await provider.start();
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-drain-review4-'));
    env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'info' }, {
      PROVIDER: 'cloud-api',
      PROVIDER_BASE_URL: `http://127.0.0.1:${provider.port}`,
      PROVIDER_ACCESS_TOKEN: 'e2e-token',
    });
    cli('seed', FIXTURE);
    apiKey = cli('keys', 'issue', '--company', '101', '--name', 'e2e drain').trim();
    // on a port the system picks as it binds, its URL read from what it prints (a port found free first could be
    // taken before the child bound it)
    ({ serve, url } = await startServeOnAnyPort(env));
  }, TIMEOUT);

  afterAll(async () => {
    await serve?.kill();
    await provider.stop();
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('answers every send in flight with 200 (ending its connection) and stores its events; a late request is refused in the API shape; exit 0', async () => {
    // four sends on fetch's keep-alive connections, and one on a socket of its own whose answer the test reads raw
    const sends = [1, 2, 3, 4].map((n) =>
      fetch(`${url}/api/v1/platform-templates/send/`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': apiKey }, body: sendBody(n),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as { message_id?: string } }), (err: Error) => ({ status: 0, body: { error: String(err.cause ?? err) } })));
    const port = Number(new URL(url).port);
    const inFlight = connect(port, '127.0.0.1');
    await new Promise((ok) => inFlight.once('connect', ok));
    const inFlightAnswer = responsesOn(inFlight, 1);
    inFlight.write(rawSend(5));
    // a request whose headers are still arriving when the shutdown begins
    const late = connect(port, '127.0.0.1');
    await new Promise((ok) => late.once('connect', ok));
    const lateAnswer = responsesOn(late, 1);
    late.write('GET /api/v1/business-accounts/ HTTP/1.1\r\nHost: x\r\n');
    await waitFor('five sends at the provider', () => provider.ids.length === 5);

    const closed = new Promise((ok) => inFlight.once('close', ok));
    serve.child.kill('SIGTERM');
    await waitFor('the shutdown line', () => serve.output().includes('"msg":"shutting down: no new requests, finishing in-flight work"'));
    // the listener is closed at once: a new connection is refused
    await expect(fetch(`${url}/readyz`).then((r) => r.status)).rejects.toThrow();
    late.write(`X-API-Key: ${apiKey}\r\n\r\n`);
    // refused before anything runs, in the API's error shape, and the connection ends with the answer
    const [refused] = await lateAnswer;
    expect(refused.status).toBe(503);
    expect(refused.headers).toContain('connection: close');
    expect(refused.headers).toContain('retry-after: 1');
    expect(JSON.parse(refused.body)).toEqual({ error: 'the server is shutting down: send the request again' });
    provider.release();

    const answered = await Promise.all(sends);
    const [sendAnswer] = await inFlightAnswer;
    expect([...answered.map((a) => a.status), sendAnswer.status]).toEqual([200, 200, 200, 200, 200]);
    const ids = [...answered.map((a) => (a.body as { message_id?: string }).message_id), JSON.parse(sendAnswer.body).message_id].sort();
    expect(ids).toEqual([...provider.ids].sort());
    // answered after the shutdown began: the answer says the connection ends with it, and the server ends it (kept
    // open, it held the stop for the keep-alive timeout, and a client reusing it could lose its request to the close)
    expect(sendAnswer.headers).toContain('connection: close');
    await closed;
    expect((await serve.exited).code).toBe(0);

    const stored = await db.pool.query(
      `SELECT data->>'providerMessageId' AS id FROM es.events WHERE type = 'TemplateSendAccepted' ORDER BY 1`);
    expect(stored.rows.map((r) => r.id)).toEqual(ids);
  }, TIMEOUT);
});
