import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import type { Position } from '../../src/ports/event-store';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, e2eServerEnv, freePort, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';
import { waitUntil } from '../support/sends';

// Review 20: the readers of the whole log besides `events export` (review 19) on a log of large events, each in a
// process with a small heap. A bulk send's BulkRecipientsAdded chunks are written as createBulkSend writes them
// (src/commands/bulk/create.ts: one append per chunk stream, at most 1,000 recipients or 256 KiB of recipients'
// JSON a chunk): here 1,000 chunks of 100 recipients with ~2.5 KB of variables each, ~256 KiB a chunk, ~256 MB of
// log. Before the fix the projection runner read 1,000 events a read (and its shared tail kept up to 4,000), a
// rebuild 2,000 and the webhook fan-out 1,001, whatever their size: the whole log in one read, held at once, and each
// process died of its 192 MB heap. A heap limit far below the log's size is the check (no timing).

const EVENTS = 1000;
const RECIPIENTS = 100;
const HEAP_MB = 192;

const d = describeWithBuiltCli('review20 catch-up memory suite');

interface Run {
  status: number | null;
  signal: string | null;
  out: string;
}

function runCli(env: NodeJS.ProcessEnv, args: string[]): Promise<Run> {
  return new Promise((ok) => {
    const child = spawn(process.execPath, [`--max-old-space-size=${HEAP_MB}`, CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-20_000)));
    child.on('close', (status, signal) => ok({ status, signal, out }));
  });
}

d('review20: catching up over a log of large bulk chunks keeps memory bounded', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let head: Position;
  let worker: ChildProcess | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    dir = mkdtempSync(join(tmpdir(), 'review20-mem-'));
    env = e2eServerEnv({ dataDir: join(dir, 'data'), port: String(await freePort()), databaseUrl: db.url, logLevel: 'warn' });
    // the projections' checkpoint rows (what a first start makes)
    const status = await runCli(env, ['projections', 'status']);
    expect(status).toMatchObject({ status: 0 });
    const bulkId = randomUUID();
    const at = new Date().toISOString();
    let next = 0;
    const appendChunks = async () => {
      for (let chunk = next++; chunk < EVENTS; chunk = next++) {
        const recipients = Array.from({ length: RECIPIENTS }, (_, i) => ({
          index: chunk * RECIPIENTS + i,
          phone: `+54911${String(chunk * RECIPIENTS + i).padStart(8, '0')}`,
          variables: { '1': `${chunk}:${i}:`.padEnd(2500, 'x') },
          buttonVariables: {},
        }));
        await store.append(`bulkchunk-${bulkId}-${chunk}`, [{
          type: 'BulkRecipientsAdded',
          data: { bulkId, companyId: 7, chunk, recipients },
          metadata: { eventId: randomUUID(), correlationId: bulkId, causationId: null, companyId: 7, actor: 'system', at },
        }], 'no_stream');
      }
    };
    await Promise.all(Array.from({ length: 4 }, appendChunks));
    head = await store.headPosition();
  }, 600_000);

  afterAll(async () => {
    if (worker && worker.exitCode === null && worker.signalCode === null) {
      worker.kill('SIGKILL');
      await new Promise((ok) => worker!.once('close', ok));
    }
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(`the log: ${EVENTS} chunk events of about 256 KiB (far more than a ${HEAP_MB} MB heap)`, async () => {
    const { rows } = await db.pool.query<{ n: string; bytes: string }>(
      `SELECT count(*)::text AS n, sum(octet_length(data::text))::text AS bytes FROM es.events WHERE type = 'BulkRecipientsAdded'`,
    );
    expect(Number(rows[0].n)).toBe(EVENTS);
    expect(Number(rows[0].bytes)).toBeGreaterThan(EVENTS * 250_000);
  });

  it(`projections rebuild reads the whole log with a ${HEAP_MB} MB heap`, async () => {
    const r = await runCli(env, ['projections', 'rebuild', 'sends']);
    expect({ status: r.status, signal: r.signal, out: r.out.slice(-2000) }).toEqual({
      status: 0, signal: null, out: expect.stringMatching(new RegExp(`rebuilt sends v\\d+: ${EVENTS} events read, 0 applied`)),
    });
    expect(r.out).not.toMatch(STACK_LINE);
  }, 600_000);

  /** Starts `worker` with the small heap; resolves once `reached` holds (the worker still alive), then stops it. */
  async function workerUntil(reached: () => Promise<boolean>): Promise<{ status: number | null; signal: string | null; out: string }> {
    const child = spawn(process.execPath, [`--max-old-space-size=${HEAP_MB}`, CLI, 'worker'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    worker = child;
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-20_000)));
    child.stderr!.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-20_000)));
    const closed = new Promise<{ status: number | null; signal: string | null }>((ok) => child.on('close', (status, signal) => ok({ status, signal })));
    let exited: { status: number | null; signal: string | null } | undefined;
    void closed.then((x) => (exited = x));
    const done = await waitUntil(async () => (exited ? 'exited' : (await reached()) ? 'reached' : false), 540_000, 'the worker to catch up');
    if (done === 'reached') child.kill('SIGTERM');
    const end = await closed;
    return { ...end, out: `${done}: ${out.slice(-3000)}` };
  }

  const passed = (at: string) => store.comparePositions(at as Position, head) >= 0;

  it(`a worker catches its projections up over the whole log with a ${HEAP_MB} MB heap`, async () => {
    // the webhook fan-out is at the head already: only the projection runner reads the log here
    await db.pool.query(`INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ('fanout', $1)
      ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position`, [head]);
    const r = await workerUntil(async () => {
      const { rows } = await db.pool.query<{ position: string }>('SELECT position FROM projections.checkpoints');
      return rows.length > 0 && rows.every((x) => passed(x.position));
    });
    expect(r).toMatchObject({ status: 0, signal: null, out: expect.stringMatching(/^reached: /) });
    expect(r.out).not.toMatch(STACK_LINE);
    const { rows } = await db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM rm_bulk.messages');
    expect(Number(rows[0].n)).toBe(EVENTS * RECIPIENTS);
  }, 600_000);

  it(`a worker fans webhooks out over the whole log with a ${HEAP_MB} MB heap`, async () => {
    // the projections at the head (as the previous test leaves them): only the fan-out reads the log from the start
    await db.pool.query('UPDATE projections.checkpoints SET position = $1', [head]);
    await db.pool.query(`INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ('fanout', '')
      ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position`);
    const { rows: before } = await db.pool.query<{ position: string }>(`SELECT position FROM webhooks.fanout_checkpoint`);
    expect(before).toEqual([{ position: '' }]);
    const r = await workerUntil(async () => {
      const { rows } = await db.pool.query<{ position: string }>(`SELECT position FROM webhooks.fanout_checkpoint WHERE name = 'fanout'`);
      return rows.length === 1 && passed(rows[0].position);
    });
    expect(r).toMatchObject({ status: 0, signal: null, out: expect.stringMatching(/^reached: /) });
    expect(r.out).not.toMatch(STACK_LINE);
  }, 600_000);
});
