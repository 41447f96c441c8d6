import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Pool } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { describeWithBuiltCli, STACK_LINE } from '../support/e2e-server';
import { eventsCliEnv, type ExportedLine as Line, type ExportRun, operatorRegistered, runEventsExport } from '../support/events-export-cli';

// Review 19: the event log as analytics replays it, under real concurrent writers. Sixteen writers append in
// transactions of their own through the Postgres adapter (expected revisions, creations grouped into one statement
// by the group commit, appendMany across streams), three more take their transaction id early and commit late
// (savepoints, a rolled-back append among them: the classic sequence gap: a lower position committed after higher
// ones), and another database keeps a writing transaction open (the cluster's horizon pinned: the readers switch
// to this database's own). Meanwhile `switchboard events export` processes follow the log in small pieces, each
// resuming from the position of the last line the previous one wrote (README: "continue later with --from
// '<position of the last line>'"), or from the position it printed. Every committed event must come exactly once,
// in one order that a later full export gives too, and nothing rolled back.

const SECRETS = { ANONYMIZATION_SECRET: 'review19-anonymization-secret', API_KEY_PEPPER: 'review19-api-key-pepper' };

const d = describeWithBuiltCli('review19 event-log concurrency suite');

d('review19: exports resumed while many writers append concurrently', () => {
  let db: TestDatabase;
  let other: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    other = await createTestDatabase({ migrate: false });
    dir = mkdtempSync(join(tmpdir(), 'review19-conc-'));
    env = eventsCliEnv(db.url, dir, SECRETS);
  });
  afterAll(async () => {
    await db?.drop();
    await other?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const exportLog = (args: string[]): Promise<ExportRun> => runEventsExport(env, args);

  const committed = new Set<string>();
  const rolledBack = new Set<string>();

  /** Appends through the adapter: its own stream at exact revisions, a creation (group commit) and an appendMany. */
  async function adapterWriter(store: PostgresEventStore, w: number, rounds: number): Promise<void> {
    const stream = `r19-w${w}`;
    for (let i = 0; i < rounds; i++) {
      const a = [operatorRegistered(w, 2 * i + 1), operatorRegistered(w, 2 * i + 2)];
      await store.append(stream, a, i === 0 ? 'no_stream' : BigInt(2 * i - 1));
      a.forEach((e) => committed.add(e.metadata.eventId));
      const c = operatorRegistered(w, 1000 + i);
      await store.append(`r19-w${w}-created-${i}`, [c], 'no_stream');
      committed.add(c.metadata.eventId);
      await new Promise((r) => setTimeout(r, 40)); // paced: the followers keep up with the head
      if (i % 5 === 0) {
        const m = [operatorRegistered(w, 5000 + i), operatorRegistered(w, 6000 + i)];
        await store.appendMany([
          { streamId: `r19-w${w}-many-a-${i}`, events: [m[0]], expected: 'no_stream' },
          { streamId: `r19-w${w}-many-b-${i}`, events: [m[1]], expected: 'any' },
        ]);
        m.forEach((e) => committed.add(e.metadata.eventId));
      }
    }
  }

  /** Each follower's runs so far (follow, follow --limit, readLoop). */
  const runsSoFar = [0, 0, 0];
  const FOLLOWED_IN_PIECES = 4;

  /**
   * Appends one event every 100 ms until every follower has read at least FOLLOWED_IN_PIECES times while the log grew
   * (under load a follower's run can take longer than the other writers' rounds).
   */
  async function growUntilFollowed(store: PostgresEventStore): Promise<void> {
    for (let i = 0; runsSoFar.some((n) => n < FOLLOWED_IN_PIECES); i++) {
      const e = operatorRegistered(999, i + 1);
      await store.append('r19-grow', [e], i === 0 ? 'no_stream' : BigInt(i - 1));
      committed.add(e.metadata.eventId);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const INSERT = `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ($1, $2, $3, $4, $5, $6)`;

  /** Takes its transaction id first, appends, waits, commits: transactions with higher ids commit before it. */
  async function lateWriter(w: number, rounds: number): Promise<void> {
    const c = new Client({ connectionString: db.url });
    await c.connect();
    let rev = 0;
    try {
      for (let i = 0; i < rounds; i++) {
        await c.query('BEGIN');
        await c.query('SELECT pg_current_xact_id()');
        await c.query('SELECT pg_sleep(0.03)');
        const e = operatorRegistered(w, i + 1);
        await c.query(INSERT, [`r19-late-${w}`, rev, e.metadata.eventId, e.type, e.data, e.metadata]);
        // an append in a savepoint rolled back: never in the log
        await c.query('SAVEPOINT s');
        const gone = operatorRegistered(w, 100_000 + i);
        await c.query(INSERT, [`r19-late-${w}`, rev + 1, gone.metadata.eventId, gone.type, gone.data, gone.metadata]);
        await c.query('ROLLBACK TO SAVEPOINT s');
        rolledBack.add(gone.metadata.eventId);
        // one in a savepoint kept
        await c.query('SAVEPOINT t');
        const kept = operatorRegistered(w, 200_000 + i);
        await c.query(INSERT, [`r19-late-${w}`, rev + 1, kept.metadata.eventId, kept.type, kept.data, kept.metadata]);
        await c.query('RELEASE SAVEPOINT t');
        await c.query('SELECT pg_sleep(0.03)');
        if (i % 7 === 3) {
          await c.query('ROLLBACK');
          rolledBack.add(e.metadata.eventId).add(kept.metadata.eventId);
        } else {
          await c.query('COMMIT');
          committed.add(e.metadata.eventId).add(kept.metadata.eventId);
          rev += 2;
        }
      }
    } finally {
      await c.end();
    }
  }

  /** A writing transaction of another database, open for `ms` at a time: the cluster's oldest, pinned. */
  async function otherDatabase(until: Promise<unknown>): Promise<void> {
    let done = false;
    void until.then(() => (done = true));
    const c = new Client({ connectionString: other.url });
    await c.connect();
    try {
      while (!done) {
        await c.query('BEGIN');
        await c.query('SELECT pg_current_xact_id()');
        await new Promise((r) => setTimeout(r, 1500));
        await c.query('COMMIT');
      }
    } finally {
      await c.end();
    }
  }

  /** Follows the log in pieces of `--limit`, each resuming from the last line's position (or the printed one). */
  async function follow(args: string[], resumeFromLastLine: boolean, until: Promise<unknown>, follower: number): Promise<{ lines: Line[]; runs: number }> {
    let done = false;
    void until.then(() => (done = true));
    const got: Line[] = [];
    let position = '';
    let runs = 0;
    for (;;) {
      const finalRound = done;
      const r = await exportLog([...(position ? ['--from', position] : []), ...args]);
      runsSoFar[follower] = ++runs;
      expect({ status: r.status, stack: STACK_LINE.test(r.stderr), stderr: r.status === 0 ? "" : r.stderr }).toEqual({ status: 0, stack: false, stderr: "" });
      expect(r.resume).toBeDefined();
      got.push(...r.lines);
      if (resumeFromLastLine) {
        if (r.lines.length) position = r.lines[r.lines.length - 1].position;
      } else {
        position = r.resume!;
      }
      if (finalRound && r.lines.length === 0) return { lines: got, runs };
    }
  }

  /** A reader in this process: the adapter's readAll from each batch's nextPosition, as a job resuming would. */
  async function readLoop(store: PostgresEventStore, until: Promise<unknown>, follower: number): Promise<{ lines: Line[]; runs: number }> {
    let done = false;
    void until.then(() => (done = true));
    const lines: Line[] = [];
    let position = '' as Parameters<PostgresEventStore['readAll']>[0];
    let runs = 0;
    for (;;) {
      const finalRound = done;
      const batch = await store.readAll(position, 50);
      runsSoFar[follower] = ++runs;
      for (const e of batch.events) lines.push({ position: e.position, stream: e.streamId, revision: e.revision.toString(), type: e.type, data: e.data, metadata: e.metadata });
      position = batch.nextPosition;
      if (finalRound && batch.events.length === 0) return { lines, runs };
      if (batch.events.length === 0) await new Promise((r) => setTimeout(r, 5));
    }
  }

  it('every committed event comes exactly once, in the order of a later full export; nothing rolled back', async () => {
    const pool = new Pool({ connectionString: db.url, max: 20 });
    const store = new PostgresEventStore(pool, { pinnedHorizonMs: 100 });
    try {
      const writers = Promise.all([
        ...Array.from({ length: 16 }, (_, w) => adapterWriter(store, w + 1, 60)),
        ...[101, 102, 103].map((w) => lateWriter(w, 80)),
        growUntilFollowed(store),
      ]);
      const [fromLast, fromPrinted, inProcess] = await Promise.all([
        follow([], true, writers, 0),
        follow(['--limit', '97'], false, writers, 1),
        readLoop(new PostgresEventStore(pool, { pinnedHorizonMs: 100 }), writers, 2),
        otherDatabase(writers),
      ]);
      await writers;
      const full = await exportLog([]);
      expect(full.status).toBe(0);
      const order = full.lines.map((l) => l.metadata.eventId as string);
      expect(new Set(order)).toEqual(committed);
      for (const got of [fromLast, fromPrinted, inProcess]) {
        expect(got.runs).toBeGreaterThan(FOLLOWED_IN_PIECES); // the log was followed in pieces while it grew, and to its end
        const ids = got.lines.map((l) => l.metadata.eventId as string);
        expect(ids.filter((id) => rolledBack.has(id))).toEqual([]);
        expect(ids.length - new Set(ids).size).toBe(0); // none twice
        expect(ids).toEqual(order); // none missing, and the same order
      }
      // positions strictly increase in the full export; each stream's revisions come in order
      const byStream = new Map<string, number>();
      for (const l of full.lines) {
        expect(Number(l.revision)).toBe((byStream.get(l.stream) ?? -1) + 1);
        byStream.set(l.stream, Number(l.revision));
      }
      expect(committed.size).toBeGreaterThan(3500);
    } finally {
      await pool.end();
    }
  }, 600_000);
});
