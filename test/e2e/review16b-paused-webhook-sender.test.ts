import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CliProcess, runCli, startServeOnAnyPort } from '../support/cli-process';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { describeWithBuiltCli, e2eServerEnv } from '../support/e2e-server';
import { sendsFixture, SHOP } from '../support/sends';

// Review 16b: two built `serve` processes on one database and a client webhook endpoint run by the test. The process
// that posts the delivery (P) is paused (SIGSTOP) while its request is at the endpoint, which then answers 500. P's
// claim lease (60 s) runs out; the other process (Q) claims the delivery and posts it again (at least once: P never
// recorded an answer). While Q's request is at the endpoint, P is resumed (SIGCONT) and reads its old 500. Before,
// P recorded it against a delivery now leased to Q: the delivery was made due again in 5 s (its first retry), and
// posted a third time while Q's request was still open. An answer that fails after its claim's lease is over is now
// not recorded (the delivery is another sender's, or due again already). The endpoint must get the event twice (P's,
// Q's), not three times, and the delivery end succeeded (Q's 200).

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const d = describeWithBuiltCli('review 16b paused-webhook-sender suite');

d('review 16b: a serve paused with a webhook request at the endpoint', () => {
  let db: TestDatabase;
  let dataDir: string;
  let receiver: Server;
  const started: CliProcess[] = [];
  /** each request of the test's event: who posted it (pid), and its answer, given when the test says */
  const posts: Array<{ pid: number | undefined; res: ServerResponse }> = [];

  const pidOfClient = (port: number): number | undefined => {
    try {
      const out = execFileSync('ss', ['-tnpH', `sport = :${port}`], { encoding: 'utf8' });
      return Number(/pid=(\d+)/.exec(out)?.[1]) || undefined;
    } catch {
      return undefined;
    }
  };
  const startServe = async (name: string) => {
    const env = e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'warn' }, {
      PGAPPNAME: name, RATE_LIMIT_ENABLED: 'false', WEBHOOKS_ALLOW_HTTP: 'true', WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', SANDBOX_DELIVERY: 'off',
    });
    // on a port the system picks as it binds, its URL read from what it prints (a port found free first could be
    // taken before the child bound it)
    const { serve: p, url } = await startServeOnAnyPort(env);
    started.push(p);
    return { p, url };
  };
  const post = async (url: string, path: string, body: unknown) => {
    const r = await fetch(`${url}${path}`, { method: 'POST', headers: { 'x-api-key': SHOP.key, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, body: (await r.json()) as any };
  };
  const until = async (what: string, done: () => boolean | Promise<boolean>, ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (await done()) return;
      await sleep(100);
    }
    throw new Error(`never: ${what}`);
  };

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => posts.push({ pid: pidOfClient(req.socket.remotePort!), res }));
    });
    await new Promise<void>((ok) => receiver.listen(0, '127.0.0.1', ok));
    db = await createTestDatabase({ migrate: false });
    dataDir = mkdtempSync(join(tmpdir(), 'sb-paused-hook-'));
    writeFileSync(join(dataDir, 'fixture.json'), JSON.stringify(sendsFixture()));
    runCli(e2eServerEnv({ dataDir, port: '0', databaseUrl: db.url, logLevel: 'warn' }), ['seed', join(dataDir, 'fixture.json')]);
  }, 120_000);

  afterAll(async () => {
    for (const p of started) {
      p.child.kill('SIGCONT');
      await p.kill();
    }
    receiver?.closeAllConnections();
    await new Promise((ok) => receiver?.close(ok));
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("the event is posted twice (P's, then Q's after P's lease), not a third time; the delivery ends succeeded", async () => {
    const A = await startServe('sb-hook-A');
    const B = await startServe('sb-hook-B');
    const byPid = new Map([[A.p.child.pid!, A], [B.p.child.pid!, B]]);
    const port = (receiver.address() as { port: number }).port;
    expect((await post(A.url, '/api/v1/webhook-endpoints/', { url: `http://127.0.0.1:${port}/hooks`, event_types: ['message.sent'] })).status).toBe(201);
    expect((await post(A.url, '/api/v1/platform-templates/send/', {
      phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'es', recipient_phone: '+5491177100001',
    })).status).toBe(200);

    await until('the first post', () => posts.length >= 1, 60_000);
    const P = posts[0].pid!;
    expect(byPid.has(P)).toBe(true);
    process.kill(P, 'SIGSTOP');
    await sleep(200);
    posts[0].res.writeHead(500).end(); // waits in P's socket while P is paused
    // P's lease ends after 60 s; Q claims the delivery and posts it again (a generous bound)
    await until("Q's post", () => posts.length >= 2, 150_000);
    const Q = [...byPid.keys()].find((pid) => pid !== P)!;
    expect(posts[1].pid).toBe(Q);
    process.kill(P, 'SIGCONT');
    // Q's request is held open while P records its old answer (Q's timeout is 10 s): a third post, if any, comes now
    await sleep(8000);
    posts[1].res.writeHead(200).end();
    for (const extra of posts.slice(2)) extra.res.writeHead(200).end();
    await until('the delivery recorded', async () =>
      (await db.pool.query(`SELECT 1 FROM webhooks.deliveries WHERE status <> 'pending'`)).rows.length > 0, 60_000);
    await sleep(1000);
    const deliveries = (await db.pool.query<{ status: string; attempts: number }>('SELECT status, attempts FROM webhooks.deliveries')).rows;
    console.log(`posts by: ${posts.map((p) => (p.pid === P ? 'P' : p.pid === Q ? 'Q' : p.pid)).join(', ')}; deliveries: ${JSON.stringify(deliveries)}`);
    expect(posts.map((p) => (p.pid === P ? 'P' : 'Q'))).toEqual(['P', 'Q']);
    expect(deliveries.map((x) => x.status)).toEqual(['succeeded']);
    expect(byPid.get(Q)!.p.output()).not.toMatch(/"level":50/);
  }, 300_000);
});
