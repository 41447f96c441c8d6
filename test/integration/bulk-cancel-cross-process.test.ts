import pino from 'pino';
import { createBulkSend } from '../../src/commands/bulk/create';
import { seedFixture } from '../../src/commands/provisioning/seed';
import type { BulkDispatcher as BulkDispatcherClass, BulkDispatcherOptions } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, FakeClock, phones, RecordingProvider, sandbox, waitForBulk } from '../support/bulk';
import { createTestApp } from '../support/services';
import { waitUntil } from '../support/sends';

// A cancel accepted by one process reaches the bulk dispatcher of another process mid-window. The dispatcher is
// loaded in its own module registry (jest.isolateModules): its in-process signals (src/commands/bulk/signals.ts)
// are not the API's, as in a `worker` beside a `serve`; only the shared database joins them.

const START = Date.parse('2026-03-01T10:00:00.000Z');
const BASE = '/api/v1/platform-templates';
const WINDOW = 50;

function loadDispatcherOfAnotherProcess(): typeof BulkDispatcherClass {
  let loaded!: typeof BulkDispatcherClass;
  jest.isolateModules(() => {
    loaded = require('../../src/workers/bulk-dispatcher').BulkDispatcher;
  });
  return loaded;
}

describe('bulk cancel across processes', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = new FakeClock(START);
  let provider: RecordingProvider;
  const running: BulkDispatcherClass[] = [];
  const RemoteDispatcher = loadDispatcherOfAnotherProcess();
  /** what the remote dispatcher logs (its own logger, as another process has) */
  const logged: Array<{ msg: string; bulkId?: string }> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line)) });

  beforeAll(async () => {
    provider = new RecordingProvider(sandbox(), clock.now);
    t = await createTestApp({ now: clock.now, provider });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  /** held sends are let go whatever the test did, so its dispatcher can stop */
  const gates: Array<() => void> = [];
  afterEach(async () => {
    for (const release of gates.splice(0)) release();
    await Promise.all(running.splice(0).map((d) => d.stop()));
    provider.hold = undefined;
  });
  afterAll(async () => {
    await t?.close();
  });

  const remoteDispatcher = (options: BulkDispatcherOptions = {}) => {
    const d = new RemoteDispatcher({ ...t.services, logger }, {
      now: clock.now, sleep: clock.sleep, pollMs: 20, provider, unlimitedWindow: WINDOW, concurrency: 1, ...options,
    });
    running.push(d);
    d.start();
    return d;
  };
  /** a bulk on the TIER_UNLIMITED number whose 10th send is held (the slow provider) until `release` */
  const bulkHeldAtTen = async (prefix: string) => {
    const list = phones(WINDOW, prefix);
    let reached!: () => void;
    const atTen = new Promise<void>((resolve) => { reached = resolve; });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    gates.push(release);
    provider.hold = (req) => (req.to === list[9] ? (reached(), gate) : undefined);
    const created = await createBulkSend(t.services, {
      companyId: BULK_CO.companyId, actor: 'test-key', userId: BULK_CO.user.id, phoneNumberId: BULK_CO.unlimited.phoneNumberId,
      templateName: 'welcome', language: 'es', recipients: list.map((phone) => ({ phone })),
    });
    return { list, bulkId: created.bulkId, atTen, release };
  };
  /** the backend of a dispatcher's LISTEN connection (its listener's client, once LISTEN has been answered) */
  const listenerPidOf = (d: BulkDispatcherClass) =>
    (d as unknown as { cancels: { connection?: { processID?: number | null } } }).cancels.connection?.processID ?? undefined;
  const callsTo = (list: string[]) => provider.calls.filter((c) => list.includes(c.to)).length;
  const sendsTo = (list: string[]) => list.map((p) => provider.perRecipient.get(p) ?? 0);
  const workRows = async (bulkId: string) =>
    (await t.db.pool.query(
      `SELECT state, count(*)::int AS n, count(dispatcher)::int AS with_dispatcher, sum(attempts)::int AS attempts
         FROM bulk_work.recipients WHERE bulk_id = $1 GROUP BY state ORDER BY state`,
      [bulkId],
    )).rows;
  /** until the window's outcomes are recorded (no row of the bulk left in flight) */
  const windowRecorded = async (bulkId: string) => {
    for (const deadline = Date.now() + 30_000; ;) {
      const r = await t.db.pool.query(`SELECT count(*)::int AS n FROM bulk_work.recipients WHERE bulk_id = $1 AND state = 'in_flight'`, [bulkId]);
      if (r.rows[0].n === 0) return;
      if (Date.now() > deadline) throw new Error(`bulk ${bulkId}: recipients still in flight`);
      await new Promise((r2) => setTimeout(r2, 20));
    }
  };
  const until = async (what: string, check: () => boolean) => {
    for (const deadline = Date.now() + 30_000; !check();) {
      if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it('a cancel accepted by the API stops another process\'s dispatcher mid-window: no send starts after the answer', async () => {
    const { list, bulkId, atTen, release } = await bulkHeldAtTen('+54911720');
    remoteDispatcher();
    await atTen; // the remote dispatcher holds a window of 50 and has started 10 sends, the 10th still at the provider

    const res = await t.app.inject({ method: 'POST', url: `${BASE}/bulk-sends/${bulkId}/cancel/`, headers: { 'x-api-key': BULK_CO.key } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: bulkId, status: 'CANCELLED' });
    const callsAtAnswer = callsTo(list);
    expect(callsAtAnswer).toBe(10);

    release(); // the send in flight at the cancel answers
    await windowRecorded(bulkId);
    expect(callsTo(list) - callsAtAnswer).toBe(0);
    expect(sendsTo(list)).toEqual([...Array(10).fill(1), ...Array(40).fill(0)]);
    // the unsent rest of the window is back to pending, as the cancel leaves the never-sent recipients
    expect(await workRows(bulkId)).toEqual([
      { state: 'pending', n: 40, with_dispatcher: 0, attempts: 0 },
      { state: 'sent', n: 10, with_dispatcher: 10, attempts: 10 },
    ]);
    await waitForBulk(t.db.pool, BULK_CO.companyId, bulkId, (b) => b.sentCount === 10);
    const detail = await t.app.inject({ method: 'GET', url: `${BASE}/bulk-sends/${bulkId}/`, headers: { 'x-api-key': BULK_CO.key } });
    expect(detail.json()).toMatchObject({ status: 'CANCELLED', sent_count: 10, pending_count: 40, failed_count: 0, progress_percentage: 20 });
    const finished = await t.db.pool.query(`SELECT count(*)::int AS n FROM es.events WHERE type = 'BulkSendFinished' AND data->>'bulkId' = $1`, [bulkId]);
    expect(finished.rows[0].n).toBe(0);
  });

  it('a cancel made while the dispatcher\'s listening connection was down is found when it is back', async () => {
    const { list, bulkId, atTen, release } = await bulkHeldAtTen('+54911730');
    remoteDispatcher();
    await atTen;
    // the listening connection is lost, and the cancel's flag is set meanwhile (its notification reached nobody)
    // its backend found by pid, from the dispatcher's listener once it listens: found by its last statement (LISTEN
    // ...), it was missed once the listener's heartbeat (SELECT 1, 15 s after it connected) had run
    const listenerPid = await waitUntil(async () => listenerPidOf(running[0]), 30_000, "the dispatcher's LISTEN connection");
    const dropped = await t.db.pool.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [listenerPid]);
    expect(dropped.rows).toEqual([{ ok: true }]);
    await t.db.pool.query('UPDATE bulk_work.jobs SET cancel_requested = true WHERE bulk_id = $1', [bulkId]);
    await until('the dispatcher noticed the cancel', () => logged.some((l) => l.bulkId === bulkId && /cancelled/.test(l.msg)));

    release();
    await windowRecorded(bulkId);
    expect(sendsTo(list)).toEqual([...Array(10).fill(1), ...Array(40).fill(0)]);
    expect(await workRows(bulkId)).toEqual([
      { state: 'pending', n: 40, with_dispatcher: 0, attempts: 0 },
      { state: 'sent', n: 10, with_dispatcher: 10, attempts: 10 },
    ]);
  });
});
