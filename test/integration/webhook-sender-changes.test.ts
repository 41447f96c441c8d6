import type { Notification, Pool, PoolClient } from 'pg';
import { WEBHOOK_ENDPOINTS_CHANGED_CHANNEL } from '../../src/projections/change-signals';
import { pauseOf, WEBHOOK_ENDPOINT_PAUSED_CHANNEL } from '../../src/workers/webhook-pauses';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { metricSample } from '../support/metrics';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// What a sender learns of its endpoints besides its own claims (docs/webhooks.md, "An endpoint changed under a
// lane", "Retry-After"), on real Postgres and a real receiver: a change it missed while its LISTEN connection was
// down, a change heard while it was reading the endpoints, and another sender's Retry-After pause.

const BASE = '/api/v1/webhook-endpoints/';

/**
 * The test database as one sender sees it (a pool of its own, in effect): its new connections can be held back (its
 * LISTEN connection cannot come back meanwhile), one read of a kind held after it ran (the sender gets its rows
 * later), and what its LISTEN connection heard is kept, once the sender has handled it.
 */
function senderView(pool: Pool) {
  let connections: Promise<void> | undefined;
  let openConnections = () => {};
  let nextConnection: Promise<void> | undefined;
  let openNextConnection = () => {};
  const heard: Notification[] = [];
  const watched = new WeakSet<PoolClient>();
  /** the connections this sender holds now (a pooled one may serve another sender later) */
  const held = new WeakSet<PoolClient>();
  /** the held connections whose LISTEN has been answered (and no UNLISTEN since) */
  const listening = new Set<PoolClient>();
  const reads: Array<{ matches: (text: string, values: unknown) => boolean; ran: () => void; gate: Promise<void> }> = [];
  const textOf = (q: unknown) => (typeof q === 'string' ? q : (q as { text?: string }).text ?? '');
  const view = new Proxy(pool, {
    get(target, prop) {
      if (prop === 'connect') {
        return async (...args: unknown[]) => {
          if (args.length > 0) return (target.connect as (...a: unknown[]) => unknown)(...args);
          const next = nextConnection;
          nextConnection = undefined;
          await next;
          while (connections) await connections;
          const client = await target.connect();
          if (!watched.has(client)) {
            watched.add(client);
            // registered before the sender's own listener: kept once the sender's has run
            client.on('notification', (msg) => held.has(client) && setImmediate(() => heard.push(msg)));
            // which connection listens, from the statements it was sent (no other backend can ask Postgres that, and
            // pg_stat_activity shows only the last statement: the listener's heartbeat, SELECT 1, replaces the LISTEN)
            const query = client.query;
            client.query = ((...args: unknown[]) => {
              const result = (query as (...a: unknown[]) => unknown).apply(client, args);
              const text = textOf(args[0]);
              if (/^(UN)?LISTEN /.test(text) && result instanceof Promise) {
                result.then(() => {
                  if (text.startsWith('LISTEN ') && held.has(client)) listening.add(client);
                  else listening.delete(client);
                }, () => undefined);
              }
              return result;
            }) as PoolClient['query'];
          }
          held.add(client);
          const release = client.release;
          client.release = (...args: Parameters<PoolClient['release']>) => {
            held.delete(client);
            listening.delete(client);
            client.release = release;
            return release.apply(client, args);
          };
          return client;
        };
      }
      if (prop === 'query') {
        return async (...args: unknown[]) => {
          const result = await (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
          const text = textOf(args[0]);
          const values = typeof args[0] === 'string' ? args[1] : (args[0] as { values?: unknown }).values;
          const held = reads.findIndex((r) => r.matches(text, values));
          if (held >= 0) {
            const [read] = reads.splice(held, 1);
            read.ran();
            await read.gate;
          }
          return result;
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    pool: view,
    heard,
    /** the backend of this sender's LISTEN connection, once LISTEN has been answered on it (committed: notifications reach it) */
    listeningPid: async (): Promise<number | undefined> => {
      const pids = [...listening].map((c) => (c as PoolClient & { processID?: number | null }).processID ?? undefined);
      return pids.length === 1 ? pids[0] : undefined;
    },
    /** the next new connection waits (a sender's first is its LISTEN connection) until `openConnections` */
    holdNextConnection: () => void (nextConnection = new Promise<void>((r) => (openNextConnection = r))),
    holdConnections: () => void (connections = new Promise<void>((r) => (openConnections = r))),
    openConnections: () => {
      connections = undefined;
      openConnections();
      openNextConnection();
    },
    /** holds the next read that `matches` after it ran: `ran` once it has, `release` hands the rows over */
    holdRead: (matches: (text: string, values: unknown) => boolean) => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const ran = new Promise<void>((r) => reads.push({ matches, ran: r, gate }));
      return { ran, release };
    },
  };
}

describe('webhook sender: endpoint changes and pauses from elsewhere', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, receiver, register, queue } = bed));

  const patch = (id: string, payload: object) => t.app.inject({ method: 'PATCH', url: `${BASE}${id}/`, headers: { 'x-api-key': SHOP.key }, payload });
  const pausesCounted = async () =>
    metricSample((await t.app.inject({ method: 'GET', url: '/metrics' })).body, 'switchboard_webhook_endpoint_pauses_total');

  it("a new URL given while the sender's LISTEN connection was down: once it listens again, what waits in the lane goes to the new URL", async () => {
    const ep = await register('/missed');
    const oldPath = '/missed';
    const newPath = '/missed-moved';
    let releaseOld!: () => void;
    const held = new Promise<number>((ok) => (releaseOld = () => ok(204)));
    const posted: string[] = [];
    receiver.respond((r) => {
      if (r.path === oldPath || r.path === newPath) posted.push(r.path);
      return r.path === oldPath ? held : 204;
    });
    const count = (path: string) => posted.filter((p) => p === path).length;
    await queue(ep.id, 40, 'missed-');
    const view = senderView(t.db.pool);
    const sender = startWebhookSender({ ...t.services, pool: view.pool }, { pollMs: 10, endpointConcurrency: 4 });
    try {
      await waitUntil(async () => count(oldPath) === 4, 10_000, 'four requests in flight, the rest waiting in the lane');
      const listener = await waitUntil(view.listeningPid, 10_000, "the sender's LISTEN");
      // the connection is killed and cannot come back until the change is made: its notification is missed
      view.holdConnections();
      await t.db.pool.query('SELECT pg_terminate_backend($1)', [listener]);
      await waitUntil(async () => (await t.db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [listener])).rowCount === 0 || undefined, 10_000, 'the LISTEN backend gone');
      expect((await patch(ep.id, { url: receiver.url(newPath) })).statusCode).toBe(200);
      expect(view.heard.some((n) => n.payload === ep.id)).toBe(false);
      view.openConnections();
      // listening again, the sender gives back the 36 waiting: due now (claimed afresh once the lane has room)
      await waitUntil(async () => (await t.db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 AND status = 'pending' AND next_attempt_at <= $2`,
        [ep.id, new Date()])).rows[0].n === 36 || undefined, 10_000, 'the 36 waiting given back once the sender listens again');
      releaseOld();
      await waitUntil(async () => count(newPath) === 36 || undefined, 10_000, 'the 36 that waited posted to the new URL');
    } finally {
      view.openConnections();
      releaseOld();
      await sender.stop();
    }
    expect(count(oldPath)).toBe(4); // only what was in flight
    expect(count(newPath)).toBe(36);
    await waitUntil(async () => (await t.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhooks.deliveries WHERE endpoint_id = $1 AND status = 'succeeded'`, [ep.id])).rows[0].n === 40 || undefined, 10_000, 'all 40 succeeded');
  });

  it('a new URL heard while a claim reads the endpoints: the endpoint is read again, and nothing is posted to the old URL', async () => {
    const ep = await register('/raced');
    const oldPath = '/raced';
    const newPath = '/raced-moved';
    const posted: string[] = [];
    receiver.respond((r) => {
      if (r.path === oldPath || r.path === newPath) posted.push(r.path);
      return 204;
    });
    const count = (path: string) => posted.filter((p) => p === path).length;
    const view = senderView(t.db.pool);
    // the read of this endpoint after its deliveries were claimed, held after it ran (the old URL) until the change is heard
    const endpointsRead = view.holdRead((text, values) => /webhooks\.endpoint_health/.test(text) && JSON.stringify(values).includes(ep.id));
    const sender = startWebhookSender({ ...t.services, pool: view.pool }, { pollMs: 10 });
    try {
      await waitUntil(view.listeningPid, 10_000, "the sender's LISTEN");
      await queue(ep.id, 10, 'raced-');
      await endpointsRead.ran;
      expect((await patch(ep.id, { url: receiver.url(newPath) })).statusCode).toBe(200);
      await waitUntil(async () => view.heard.some((n) => n.channel === WEBHOOK_ENDPOINTS_CHANGED_CHANNEL && n.payload === ep.id), 10_000, 'the change heard');
      endpointsRead.release();
      await waitUntil(async () => count(newPath) === 10 || undefined, 10_000, 'the 10 posted to the new URL');
    } finally {
      endpointsRead.release();
      await sender.stop();
    }
    expect(count(oldPath)).toBe(0);
    expect(count(newPath)).toBe(10);
  });

  it("another sender's Retry-After pauses the endpoint here too: nothing more is started to it until the pause ends", async () => {
    const ep = await register('/shared-pause');
    const arrivals: Array<{ id: string; at: number }> = [];
    let first: string | undefined;
    let releaseFirst!: () => void;
    const held = new Promise<number>((ok) => (releaseFirst = () => ok(204)));
    let pausedAt = 0;
    receiver.respond((r) => {
      if (r.path !== '/shared-pause') return 204;
      const id = String(r.headers['webhook-id']);
      arrivals.push({ id, at: Date.now() });
      if (id === 'msg_sp-a0' && pausedAt === 0) {
        pausedAt = Date.now();
        return { status: 429, headers: { 'Retry-After': '3' } };
      }
      if (first === undefined) {
        first = id;
        return held;
      }
      return 204;
    });
    const pausesBefore = await pausesCounted();
    // B (another process, in effect): one request at a time, held; its four other deliveries wait in its lane
    const b = senderView(t.db.pool);
    const senderB = startWebhookSender({ ...t.services, pool: b.pool }, { pollMs: 10, endpointConcurrency: 1 });
    let senderA: ReturnType<typeof startWebhookSender> | undefined;
    try {
      await waitUntil(b.listeningPid, 10_000, "B's LISTEN");
      await queue(ep.id, 5, 'sp-b');
      await waitUntil(async () => first, 10_000, "B's first request");
      // A: B's lane of the endpoint is full, so only A claims this one; it answers 429 with Retry-After: 3
      senderA = startWebhookSender(t.services, { pollMs: 10, endpointConcurrency: 1 });
      await queue(ep.id, 1, 'sp-a');
      await waitUntil(async () => b.heard.some((n) => n.channel === WEBHOOK_ENDPOINT_PAUSED_CHANNEL && pauseOf(n.payload)?.endpointId === ep.id), 10_000, "A's pause heard by B");
      releaseFirst(); // B's lane has a request to spare again
      await waitUntil(async () => arrivals.filter((a) => a.id.startsWith('msg_sp-b')).length === 5 || undefined, 15_000, "B's five");
    } finally {
      releaseFirst();
      await senderA?.stop();
      await senderB.stop();
    }
    // B started none of its four waiting within the 3 s A's answer asked for
    const waited = arrivals.filter((a) => a.id.startsWith('msg_sp-b') && a.id !== first);
    expect(waited).toHaveLength(4);
    expect(Math.min(...waited.map((a) => a.at)) - pausedAt).toBeGreaterThanOrEqual(3_000 - 5);
    expect(await pausesCounted()).toBe(pausesBefore + 1); // counted once, by the sender whose answer asked for it
  });

  it('a sender starting while another sender\'s pause runs reads it: nothing is started to the endpoint until it ends', async () => {
    const ep = await register('/earlier-pause');
    const arrivals: Array<{ id: string; at: number }> = [];
    let pausedAt = 0;
    receiver.respond((r) => {
      if (r.path !== '/earlier-pause') return 204;
      arrivals.push({ id: String(r.headers['webhook-id']), at: Date.now() });
      if (pausedAt === 0) {
        pausedAt = Date.now();
        return { status: 429, headers: { 'Retry-After': '3' } };
      }
      return 204;
    });
    const senderA = startWebhookSender(t.services, { pollMs: 10 });
    try {
      await queue(ep.id, 1, 'ep-a');
      await waitUntil(async () => (await t.db.pool.query(`SELECT 1 FROM webhooks.attempts WHERE endpoint_id = $1`, [ep.id])).rowCount === 1 || undefined, 10_000, "A's 429 recorded");
    } finally {
      await senderA.stop(); // its pause is not its own to end
    }
    await queue(ep.id, 3, 'ep-c'); // due before C starts: its first claim takes them
    // C's LISTEN connection is held back: what C knows of the pause it read as it started
    const c = senderView(t.db.pool);
    c.holdNextConnection();
    const senderC = startWebhookSender({ ...t.services, pool: c.pool }, { pollMs: 10 });
    try {
      await waitUntil(async () => arrivals.filter((a) => a.id.startsWith('msg_ep-c')).length === 3 || undefined, 15_000, "C's three");
    } finally {
      c.openConnections();
      await senderC.stop();
    }
    expect(c.heard).toEqual([]); // it never listened meanwhile
    const afterPause = arrivals.filter((a) => a.at > pausedAt);
    expect(Math.min(...afterPause.map((a) => a.at)) - pausedAt).toBeGreaterThanOrEqual(3_000 - 5);
  });

  it("a pause shared while a sender's LISTEN connection was down is read when it listens again", async () => {
    const ep = await register('/missed-pause');
    const arrivals: Array<{ id: string; at: number }> = [];
    let pausedAt = 0;
    receiver.respond((r) => {
      if (r.path !== '/missed-pause') return 204;
      arrivals.push({ id: String(r.headers['webhook-id']), at: Date.now() });
      if (pausedAt === 0) {
        pausedAt = Date.now();
        return { status: 429, headers: { 'Retry-After': '3' } };
      }
      return 204;
    });
    const b = senderView(t.db.pool);
    const senderB = startWebhookSender({ ...t.services, pool: b.pool }, { pollMs: 10 });
    try {
      const listener = await waitUntil(b.listeningPid, 10_000, "B's LISTEN");
      // B's connection is killed and cannot come back until A's 429 has paused the endpoint: B misses that notification
      b.holdConnections();
      await t.db.pool.query('SELECT pg_terminate_backend($1)', [listener]);
      await waitUntil(async () => (await t.db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [listener])).rowCount === 0 || undefined, 10_000, 'the LISTEN backend gone');
      const senderA = startWebhookSender(t.services, { pollMs: 10 });
      try {
        await queue(ep.id, 1, 'mp-a');
        await waitUntil(async () => (await t.db.pool.query(`SELECT 1 FROM webhooks.attempts WHERE endpoint_id = $1`, [ep.id])).rowCount === 1 || undefined, 10_000, "A's 429 recorded");
      } finally {
        await senderA.stop();
      }
      expect(b.heard.some((n) => n.channel === WEBHOOK_ENDPOINT_PAUSED_CHANNEL)).toBe(false);
      b.openConnections();
      await waitUntil(async () => ((await b.listeningPid()) ?? listener) !== listener || undefined, 10_000, 'B listening again (a new connection)');
      await queue(ep.id, 3, 'mp-b');
      await waitUntil(async () => arrivals.filter((a) => a.id.startsWith('msg_mp-b')).length === 3 || undefined, 15_000, "B's three");
    } finally {
      b.openConnections();
      await senderB.stop();
    }
    const afterPause = arrivals.filter((a) => a.id.startsWith('msg_mp-b'));
    expect(Math.min(...afterPause.map((a) => a.at)) - pausedAt).toBeGreaterThanOrEqual(3_000 - 5);
  });
});
