import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import type { EventToAppend } from '../../src/ports/event-store';
import { createTestDatabase, eventLogReadable, type TestDatabase } from '../support/db';
import { BUILT_CLI as CLI, describeWithBuiltCli, freePort, PROJECT_ROOT as ROOT, STACK_LINE } from '../support/e2e-server';

// Review 19: `switchboard events export` as an operator and an analytics job run it (built CLI, real Postgres):
// the documented line (docs/event-log.md), a resume giving exactly the events after a line, a reader that goes away
// (`| head`), and a --from that is no position.

const SECRETS = { ANONYMIZATION_SECRET: 'review19-anonymization-secret', API_KEY_PEPPER: 'review19-api-key-pepper' };
const ISO_UTC_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const d = describeWithBuiltCli('review19 event-log operator suite');

d('review19: events export for operators and analytics', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;
  const N = 5000;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'review19-op-'));
    env = { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, ...SECRETS, DATA_DIR: join(dir, 'data'), PORT: String(await freePort()) };
    const store = new PostgresEventStore(db.pool);
    const operator = (companyId: number, n: number): EventToAppend => ({
      type: 'OperatorRegistered',
      data: { companyId, operatorId: n, name: `op ${n}` },
      metadata: { eventId: randomUUID(), correlationId: randomUUID(), causationId: null, companyId, actor: 'cli', at: new Date().toISOString(), schemaVersion: 1 },
    });
    for (let i = 0; i < N; i += 250) {
      await store.appendMany(Array.from({ length: 250 }, (_, k) => ({ streamId: `op-${i + k}`, events: [operator(1 + ((i + k) % 3), i + k + 1)], expected: 'no_stream' as const })));
    }
    await eventLogReadable(db.pool); // another file's open transaction would hold the export back
  }, 120_000);
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const run = (args: string[]) => {
    const r = spawnSync(process.execPath, [CLI, 'events', 'export', ...args], { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, timeout: 120_000 });
    return { status: r.status, stderr: r.stderr, lines: r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
  };

  it('writes the documented line; a resume from any line gives exactly the events after it', () => {
    const all = run([]);
    expect(all.status).toBe(0);
    expect(all.lines).toHaveLength(N);
    expect(all.stderr).toContain(`exported ${N} events (scanned ${N}); resume with --from '${all.lines[N - 1].position}'`);
    const schemas = spawnSync(process.execPath, [CLI, 'events', 'schemas'], { cwd: ROOT, env, encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const version = schemas.find((s) => s.type === 'OperatorRegistered').version;
    for (const l of all.lines) {
      expect(Object.keys(l)).toEqual(['position', 'stream', 'revision', 'type', 'data', 'metadata']);
      expect(l.position).toMatch(/^\d+:\d+$/);
      expect(l.revision).toBe('0');
      expect(Object.keys(l.metadata).sort()).toEqual(['actor', 'at', 'causationId', 'companyId', 'correlationId', 'eventId', 'schemaVersion']);
      expect(l.metadata.at).toMatch(ISO_UTC_MS);
      expect(l.metadata.schemaVersion).toBe(version);
    }
    for (const k of [0, 1, 1999, 2000, 2001, 4998]) {
      const resumed = run(['--from', all.lines[k].position]);
      expect(resumed.status).toBe(0);
      expect(resumed.lines.map((l) => l.metadata.eventId)).toEqual(all.lines.slice(k + 1).map((l) => l.metadata.eventId));
    }
    // a filtered export's printed position resumes after what it scanned, its last line's position after what it wrote
    const company2 = run(['--company', '2', '--limit', '700']);
    const printed = /resume with --from '([^']*)'/.exec(company2.stderr)![1];
    expect(printed).toBe(company2.lines[699].position);
    const rest = run(['--company', '2', '--from', printed]);
    expect([...company2.lines, ...rest.lines].map((l) => l.metadata.eventId)).toEqual(all.lines.filter((l) => l.metadata.companyId === 2).map((l) => l.metadata.eventId));
  }, 300_000);

  it('a reader that goes away after one line (`| head -1`) ends the export quietly, status 0', async () => {
    const r = await new Promise<{ status: number | null; stderr: string; first: string }>((ok) => {
      const child = spawn(process.execPath, [CLI, 'events', 'export'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let first = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => {
        if (first) return;
        first = c.toString().split('\n')[0];
        child.stdout.destroy(); // the reader exits: the export's next writes meet EPIPE
      });
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', (status) => ok({ status, stderr, first }));
    });
    expect(JSON.parse(r.first).type).toBe('OperatorRegistered');
    expect(r.status).toBe(0);
    expect(r.stderr).not.toMatch(STACK_LINE);
    expect(r.stderr).toBe('');
  }, 120_000);

  it.each([
    ['garbage', 'expected "<transaction id>:<sequence>", two integers such as "7042:315"'],
    ['1048576/1048576', 'is not a position of the postgres event store'],
    ['7:01', 'is not a position of the postgres event store'],
    // well formed, but past the newest event: another log's checkpoint, or a digit changed (exported nothing, status 0)
    ['999999999999:1', 'is after the newest event of this log ('],
  ])('--from %s: one line naming --from and what it takes, status 1', (from, part) => {
    const r = run(['--from', from]);
    expect(r.status).toBe(1);
    const lines = r.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^switchboard: --from /);
    expect(lines[0]).toContain(part);
    expect(r.lines).toEqual([]);
  }, 60_000);
});
