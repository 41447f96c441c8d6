import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { describeWithBuiltCli, STACK_LINE } from '../support/e2e-server';
import { eventsCliEnv, type ExportedLine as Exported, type ExportRun, operatorRegistered, runEventsExport } from '../support/events-export-cli';

// Review 11: `switchboard events export` as analytics replays it (built CLI, test database): exports resumed from
// the printed position while real writers append, some of whose transactions take their id early and commit late;
// the union of the exports is every event exactly once, in the log's order, also with --limit and filters.

const SECRETS = { ANONYMIZATION_SECRET: 'review11-anonymization-secret', API_KEY_PEPPER: 'review11-api-key-pepper' };

const d = describeWithBuiltCli('review11 events replay suite');

d('review11: events export replayed from positions under concurrent writers', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'review11-events-'));
    env = eventsCliEnv(db.url, dir, SECRETS);
  });
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const exportLog = (args: string[]): Promise<ExportRun> => runEventsExport(env, args);

  const INSERT = `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
    VALUES ($1, $2, $3, $4, $5, $6)`;

  /**
   * A writer appending `count` events to its own stream. `late`: each append is a transaction that takes its id
   * first, waits, inserts and commits, so transactions with higher ids (the other writers') commit before it.
   */
  async function writer(stream: string, companyId: number, count: number, late: boolean, ids: string[]): Promise<void> {
    const c = new Client({ connectionString: db.url });
    await c.connect();
    try {
      for (let rev = 0; rev < count; rev++) {
        const e = operatorRegistered(companyId, rev + 1);
        if (late) {
          await c.query('BEGIN');
          await c.query('SELECT pg_current_xact_id()');
          await c.query('SELECT pg_sleep(0.05)');
        }
        await c.query(INSERT, [stream, rev, e.metadata.eventId, e.type, e.data, e.metadata]);
        ids.push(e.metadata.eventId);
        if (late) {
          await c.query('SELECT pg_sleep(0.05)');
          await c.query('COMMIT');
        }
      }
    } finally {
      await c.end();
    }
  }

  /** Exports from `from` again and again, each from the position the last one printed, until `until` settles. */
  async function follow(from: string, args: string[], until: Promise<unknown>): Promise<Exported[]> {
    let done = false;
    void until.then(() => (done = true));
    const got: Exported[] = [];
    let position = from;
    for (;;) {
      const finalRound = done;
      const r = await exportLog([...(position ? ['--from', position] : []), ...args]);
      expect(r.status).toBe(0);
      expect(r.stderr).not.toMatch(STACK_LINE);
      expect(r.resume).toBeDefined();
      got.push(...r.lines);
      position = r.resume!;
      if (finalRound && r.lines.length === 0) return got;
    }
  }

  const comparePositions = (a: string, b: string): number => {
    const [ta, sa] = a.split(':').map(BigInt);
    const [tb, sb] = b.split(':').map(BigInt);
    return ta !== tb ? (ta < tb ? -1 : 1) : sa === sb ? 0 : sa < sb ? -1 : 1;
  };

  function expectOnceInOrder(got: Exported[], expectedIds: string[]): void {
    const ids = got.map((e) => e.metadata.eventId as string);
    expect(new Set(ids).size).toBe(ids.length); // no duplicate
    expect([...ids].sort()).toEqual([...expectedIds].sort()); // no gap
    for (let i = 1; i < got.length; i++) expect(comparePositions(got[i - 1].position, got[i].position)).toBe(-1);
    // per stream, revisions in order
    const byStream = new Map<string, number>();
    for (const e of got) {
      const rev = Number(e.revision);
      expect(rev).toBe((byStream.get(e.stream) ?? -1) + 1);
      byStream.set(e.stream, rev);
    }
  }

  it('resumed exports, with and without --limit and filters, get every event once and in order while transactions commit late', async () => {
    const ids: string[] = [];
    const of7: string[] = [];
    const writers = Promise.all([
      writer('review11-a', 7, 120, false, of7),
      writer('review11-b', 8, 120, false, ids),
      writer('review11-c', 7, 30, true, of7),
      writer('review11-d', 8, 30, true, ids),
    ]);
    const [all, limited, company7] = await Promise.all([
      follow('', [], writers),
      follow('', ['--limit', '17'], writers),
      follow('', ['--company', '7', '--type', 'OperatorRegistered', '--limit', '11'], writers),
    ]);
    await writers;
    expectOnceInOrder(all, [...ids, ...of7]);
    expectOnceInOrder(limited, [...ids, ...of7]);
    expectOnceInOrder(company7, of7);
    // the documented fields of a line
    expect(Object.keys(all[0]).sort()).toEqual(['data', 'metadata', 'position', 'revision', 'stream', 'type']);
  }, 240_000); // dozens of export processes, each starting its runtime: over a minute on a loaded machine
});
