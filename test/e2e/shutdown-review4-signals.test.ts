import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI as CLI, describeWithBuiltCli, freePort } from '../support/e2e-server';
import { isRunning as running, postmasterPidOf, untilStopped } from '../support/embedded-process';

// Stop signals on the built CLI with the embedded default (docs/core.md, "Runtime": "A second signal or 30 s forces
// the exit"). A forced exit must still stop the embedded Postgres the process spawned: killed by a signal's default
// action, the process left it running, and the next start on that DATA_DIR shares it and never stops it.

const TIMEOUT = 120_000;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const d = describeWithBuiltCli('shutdown signals suite');

d('serve and worker: stop signals (built CLI, embedded default)', () => {
  let dataDir: string;
  let child: ChildProcess | undefined;
  let out = '';
  let held: Socket | undefined;

  const env = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info', ...extra,
  });

  const spawnServe = (extra?: NodeJS.ProcessEnv) => {
    out = '';
    child = spawn(process.execPath, [CLI, 'serve'], { env: env(extra), stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (x) => (out += x));
    child.stderr!.on('data', (x) => (out += x));
    return child;
  };

  const waitFor = async (what: string, done: () => boolean) => {
    for (let i = 0; i < 1200; i++) {
      if (done()) return;
      if (child?.exitCode !== null || child?.signalCode) throw new Error(`serve exited before ${what}: ${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`never saw ${what}: ${out}`);
  };

  const exited = (c: ChildProcess) => new Promise<Exit>((ok) => c.once('exit', (code, signal) => ok({ code, signal })));

  const postmasterPid = () => postmasterPidOf(dataDir);
  const postgresStopped = (pid: number) => untilStopped(pid);

  /** A request whose body never completes: the graceful stop waits for it, so a second signal arrives mid-shutdown. */
  const holdARequest = async () => {
    const url = new URL(/listening on (http:\/\/\S+)/.exec(out)![1]);
    held = connect(Number(url.port), '127.0.0.1');
    await new Promise((ok) => held!.once('connect', ok));
    held.write('POST /api/v1/contacts/lookup/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{');
  };

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-shutdown-review4-'));
  });

  afterEach(async () => {
    held?.destroy();
    if (child && child.exitCode === null && !child.signalCode) {
      child.kill('SIGKILL');
      await exited(child);
    }
    const pid = existsSync(join(dataDir, 'embedded-postgres.json')) ? postmasterPid() : undefined;
    if (pid && running(pid)) process.kill(pid, 'SIGINT'); // what the failing version left behind
  });

  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it.each([['SIGTERM', 'SIGINT'], ['SIGTERM', 'SIGTERM'], ['SIGINT', 'SIGINT']] as const)(
    '%s then %s during the graceful stop: exit 1 with a line saying so, the embedded Postgres stopped',
    async (first, second) => {
      const serve = spawnServe();
      await waitFor('the listening line', () => /listening on http:/.test(out));
      const pid = postmasterPid()!;
      await holdARequest();
      const exit = exited(serve);
      serve.kill(first);
      await waitFor('the shutdown line', () => out.includes('"msg":"shutting down: no new requests, finishing in-flight work"'));
      serve.kill(second);
      expect(await exit).toEqual({ code: 1, signal: null });
      const line = out.split('\n').find((l) => l.includes('second signal during shutdown'));
      expect(JSON.parse(line!)).toMatchObject({ level: 50, signal: second, first, msg: 'second signal during shutdown; exiting now' });
      expect(await postgresStopped(pid)).toBe(true);
    },
    TIMEOUT,
  );

  it('SIGHUP (the terminal closed) stops gracefully: exit 0, the embedded Postgres stopped', async () => {
    const serve = spawnServe();
    await waitFor('the listening line', () => /listening on http:/.test(out));
    const pid = postmasterPid()!;
    const exit = exited(serve);
    serve.kill('SIGHUP');
    expect(await exit).toEqual({ code: 0, signal: null });
    expect(out).toContain('"signal":"SIGHUP","msg":"shutting down: no new requests, finishing in-flight work"');
    expect(await postgresStopped(pid)).toBe(true);
  }, TIMEOUT);

  it("worker's ops listener: a probe still arriving during the stop is refused in the API shape; exit 0", async () => {
    const opsPort = await freePort();
    out = '';
    child = spawn(process.execPath, [CLI, 'worker'], { env: env({ WORKER_OPS_PORT: String(opsPort) }), stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (x) => (out += x));
    child.stderr!.on('data', (x) => (out += x));
    await waitFor('the started line', () => out.includes('switchboard worker started'));
    // a probe whose headers are still arriving when the stop begins keeps its connection open
    held = connect(opsPort, '127.0.0.1');
    await new Promise((ok) => held!.once('connect', ok));
    let answer = '';
    held.on('data', (x) => (answer += x));
    const ended = new Promise((ok) => held!.once('end', ok));
    held.write('GET /readyz HTTP/1.1\r\nHost: x\r\n');
    const exit = exited(child);
    child.kill('SIGTERM');
    await waitFor('the shutdown line', () => out.includes('"msg":"shutting down: no new requests, finishing in-flight work"'));
    held.write('\r\n');
    await ended;
    const [head, body] = answer.split('\r\n\r\n');
    expect(head.toLowerCase()).toMatch(/^http\/1\.1 503 service unavailable\r\n(.*\r\n)*retry-after: 1\r\n/);
    expect(head.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(body)).toEqual({ error: 'the server is shutting down: send the request again' });
    expect(await exit).toEqual({ code: 0, signal: null });
  }, TIMEOUT);

  it('SIGTERM while start-up waits for Kafka: no kill by the signal, and the embedded Postgres stopped', async () => {
    // a port nothing listens on: start-up waits STARTUP_WAIT_S for the brokers, then gives up
    const serve = spawnServe({ KAFKA_BROKERS: '127.0.0.1:1', STARTUP_WAIT_S: '15' });
    await waitFor('the Kafka wait', () => out.includes('ECONNREFUSED 127.0.0.1:1'));
    const pid = postmasterPid()!;
    expect(running(pid)).toBe(true);
    const exit = exited(serve);
    serve.kill('SIGTERM');
    const { code, signal } = await exit;
    expect(signal).toBeNull();
    expect(code).not.toBeNull();
    expect(out).toContain('"msg":"shutting down: no new requests, finishing in-flight work"');
    expect(await postgresStopped(pid)).toBe(true);
  }, TIMEOUT);
});
