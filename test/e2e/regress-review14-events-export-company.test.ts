import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BUILT_CLI, describeWithBuiltCli, freePort, PROJECT_ROOT as ROOT } from '../support/e2e-server';
import { waitUntil } from '../support/sends';

// Regression review 14 (2071212): `events export --company` took an event whose stored metadata has a company id
// that is not a number (absent, or a string) as any company's, readable events included, so it wrote such an event
// under every --company: another company's event in a company's export (before, such an event was left out). The
// "any company's" reading is only for deciding whether an unreadable event stops the export.

const CLI = BUILT_CLI;
const SECRETS = { ANONYMIZATION_SECRET: 'r14-export-anonymization', API_KEY_PEPPER: 'r14-export-pepper' };

const d = describeWithBuiltCli('events export --company and a metadata company id that is not a number');

d('events export --company and a readable event whose metadata company id is not a number', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  const insert = (stream: string, data: unknown, metadata: Record<string, unknown>) =>
    db.pool.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata) VALUES ($1, 0, $2, 'OperatorRegistered', $3, $4)`,
      [stream, randomUUID(), data, { eventId: randomUUID(), correlationId: randomUUID(), causationId: null, actor: 'cli', at: new Date().toISOString(), schemaVersion: 1, ...metadata }],
    );

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'r14-export-company-'));
    env = { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, ...SECRETS, DATA_DIR: join(dir, 'data'), PORT: String(await freePort()) };
    await insert('op-7-a', { companyId: 7, operatorId: 1, name: 'a' }, { companyId: 7 });
    await insert('op-7-no-company', { companyId: 7, operatorId: 2, name: 'b' }, {});
    await insert('op-7-text-company', { companyId: 7, operatorId: 3, name: 'c' }, { companyId: '7' });
    await insert('op-8-d', { companyId: 8, operatorId: 4, name: 'd' }, { companyId: 8 });
    // the log is read only below the cluster's oldest running writing transaction (test databases share one cluster)
    await waitUntil(async () => (await db.pool.query<{ ok: boolean }>(
      `SELECT max(tx_id) < pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS ok FROM es.events`,
    )).rows[0].ok, 60_000, 'the events to be readable');
  }, 120_000);
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const exportWith = (args: string[]) => {
    const r = spawnSync(process.execPath, [CLI, 'events', 'export', ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
    return { status: r.status, streams: r.stdout.split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { stream: string }).stream) };
  };

  it('--company 8 writes company 8\'s event only', () => {
    expect(exportWith(['--company', '8'])).toEqual({ status: 0, streams: ['op-8-d'] });
  });

  it('--company 7 writes the event whose metadata names company 7', () => {
    expect(exportWith(['--company', '7'])).toEqual({ status: 0, streams: ['op-7-a'] });
  });

  it('an export without --company writes them all', () => {
    expect(exportWith([])).toEqual({ status: 0, streams: ['op-7-a', 'op-7-no-company', 'op-7-text-company', 'op-8-d'] });
  });
});
