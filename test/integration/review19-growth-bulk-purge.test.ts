import type { Pool } from 'pg';
import { sweepBulkLeases } from '../../src/workers/bulk-lease-cron';
import type { Services } from '../../src/services';
import { createTestContext, type TestContext } from '../support/services';

// Review 19 (growth after months of use, docs/growth.md): the bulk lease sweep runs every 15 s on every process. Its
// purge of finished bulks' work rows joined every job ever created with every live work row: on a year of bulk sends
// (20,000 jobs) and the 20,000 work rows of one bulk in progress, each sweep read both tables whole to delete nothing.
// Rows read are counted from the statements' own plans (EXPLAIN ANALYZE, in a transaction rolled back, then the
// statement itself), never timed.

const NOW = new Date('2026-06-01T12:00:00.000Z');
const HOUR = 3_600_000;
const TABLES = new Set(['jobs', 'recipients']);

interface PlanNode { 'Node Type': string; 'Relation Name'?: string; 'Schema'?: string; 'Actual Rows': number; 'Actual Loops': number; 'Rows Removed by Filter'?: number; 'Index Name'?: string; Plans?: PlanNode[] }

/** Rows of bulk_work.jobs and bulk_work.recipients a plan read (returned or filtered out, every loop). */
function rowsRead(node: PlanNode, seen: Array<{ scan: string; rows: number }>): void {
  if (node['Schema'] === 'bulk_work' && node['Relation Name'] && TABLES.has(node['Relation Name']) && /Scan/.test(node['Node Type'])) {
    const rows = (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'];
    seen.push({ scan: `${node['Node Type']} ${node['Relation Name']}${node['Index Name'] ? ` (${node['Index Name']})` : ''}`, rows });
  }
  for (const child of node.Plans ?? []) rowsRead(child, seen);
}

/** The pool, its `query` measured: each statement on the work tables is explained (and rolled back) before it runs. */
function measuredPool(pool: Pool, log: Array<{ sql: string; scans: Array<{ scan: string; rows: number }>; rowCount: number }>): Pool {
  return new Proxy(pool, {
    get(target, prop) {
      if (prop !== 'query') {
        const v = Reflect.get(target, prop, target);
        return typeof v === 'function' ? v.bind(target) : v;
      }
      return async (text: string | { text: string; values?: unknown[] }, values?: unknown[]) => {
        const sql = typeof text === 'string' ? text : text.text;
        const params = typeof text === 'string' ? values : text.values;
        if (!/bulk_work\.(jobs|recipients)/.test(sql) || !/^\s*(SELECT|DELETE|UPDATE|WITH)/i.test(sql)) return target.query(text as string, values);
        const client = await target.connect();
        const scans: Array<{ scan: string; rows: number }> = [];
        try {
          await client.query('BEGIN');
          const plan = await client.query(`EXPLAIN (ANALYZE, VERBOSE, BUFFERS, FORMAT JSON) ${sql}`, params);
          rowsRead(plan.rows[0]['QUERY PLAN'][0].Plan, scans);
        } finally {
          await client.query('ROLLBACK');
          client.release();
        }
        const result = await target.query(sql, params);
        log.push({ sql: sql.replace(/\s+/g, ' ').slice(0, 90), scans, rowCount: result.rowCount ?? 0 });
        return result;
      };
    },
  });
}

async function hasPurgeMark(pool: Pool): Promise<boolean> {
  const r = await pool.query(`SELECT 1 FROM information_schema.columns WHERE table_schema = 'bulk_work' AND table_name = 'jobs' AND column_name = 'work_purged_at'`);
  return r.rowCount === 1;
}

/** `count` jobs in `state`, last changed `agoMs` before NOW, ids `prefix`-numbered; returns their ids. */
async function seedJobs(pool: Pool, count: number, state: string, agoMs: number, from = 1): Promise<string[]> {
  const r = await pool.query<{ bulk_id: string }>(
    `INSERT INTO bulk_work.jobs (bulk_id, task_id, company_id, number_id, phone_number_id, template_name, language, template,
                                 chunk_count, recipient_count, materialized_chunks, state, created_at, updated_at)
     SELECT gen_random_uuid(), 'task-' || i, 1, 1 + i % 5, 'pn', 'welcome', 'es', '{}', 1, 1000, 1, $2,
            $3::timestamptz - interval '1 hour', $3::timestamptz
       FROM generate_series($4::int, $4::int + $1::int - 1) AS i
     RETURNING bulk_id`,
    [count, state, new Date(NOW.getTime() - agoMs), from],
  );
  return r.rows.map((x) => x.bulk_id);
}

/** `count` work rows of `bulkId` as the dispatcher leaves them sent (bulk_work.recipients, migration 0003). */
async function seedRecipients(pool: Pool, bulkId: string, count: number): Promise<void> {
  await pool.query(
    `INSERT INTO bulk_work.recipients (bulk_id, idx, chunk, number_id, phone, e164, variables, button_variables, state, claimed_at, provider_message_id, outcome_at)
     SELECT $1::uuid, i, 0, 1, '+5491170' || lpad(i::text, 6, '0'), '+5491170' || lpad(i::text, 6, '0'), '{}', '{}', 'sent', $3, 'wamid.' || $1::text || '.' || i, $3
       FROM generate_series(0, $2::int - 1) AS i`,
    [bulkId, count, new Date(NOW.getTime() - HOUR)],
  );
}

describe('review 19: the bulk lease sweep after a year of bulk sends', () => {
  let t: TestContext;
  let services: Services;
  let live: string;

  beforeAll(async () => {
    t = await createTestContext({ now: () => NOW, runner: false });
    services = t.services;
    // a year of bulk sends, their work rows deleted long ago (as the sweeps of the past left them)
    await seedJobs(t.db.pool, 20_000, 'finished', 200 * 24 * HOUR);
    if (await hasPurgeMark(t.db.pool)) await t.db.pool.query(`UPDATE bulk_work.jobs SET work_purged_at = updated_at + interval '48 hours'`);
    // one bulk in progress, 20,000 work rows
    [live] = await seedJobs(t.db.pool, 1, 'processing', 0, 900_000);
    await seedRecipients(t.db.pool, live, 20_000);
    await t.db.pool.query('ANALYZE bulk_work.jobs; ANALYZE bulk_work.recipients');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a sweep with nothing to purge reads the jobs it has work for, not the history (index scans, rows read)', async () => {
    const log: Parameters<typeof measuredPool>[1] = [];
    const report = await sweepBulkLeases({ ...services, pool: measuredPool(t.db.pool, log) } as Services);
    expect(report).toMatchObject({ skipped: false, purgedRecipients: 0, draftsPromoted: 0, draftsDeleted: 0 });
    const scans = log.flatMap((s) => s.scans.map((x) => ({ ...x, sql: s.sql })));
    const read = scans.reduce((n, s) => n + s.rows, 0);
    if (process.env.REVIEW19_PRINT) console.log(JSON.stringify(scans, null, 1));
    // before the fix: 40,000+ (every job, every work row: seq scans), on every sweep
    expect({ read, seqScans: scans.filter((s) => s.scan.startsWith('Seq Scan') && s.rows > 0) }).toEqual({ read: expect.any(Number), seqScans: [] });
    expect(read).toBeLessThanOrEqual(10);
    expect(Number((await t.db.pool.query(`SELECT count(*) FROM bulk_work.recipients WHERE bulk_id = $1`, [live])).rows[0].count)).toBe(20_000);
  });

  it('a finished bulk\'s work rows go in short statements, a bounded number per sweep; then the job is never read again', async () => {
    const [old] = await seedJobs(t.db.pool, 1, 'finished', 72 * HOUR, 910_000);
    const [recent] = await seedJobs(t.db.pool, 1, 'cancelled', 1 * HOUR, 920_000);
    const [unappended] = await seedJobs(t.db.pool, 1, 'finished', 72 * HOUR, 930_000);
    await seedRecipients(t.db.pool, old, 12_000);
    await seedRecipients(t.db.pool, recent, 3_000);
    await seedRecipients(t.db.pool, unappended, 10);
    // an outcome not appended yet: its bulk's rows stay until the flush appends it
    await t.db.pool.query(`INSERT INTO bulk_work.outcome_batches (bulk_id, chunk, kind, idxs, created_at) VALUES ($1, 0, 'sent', '{0}', $2)`, [unappended, NOW]);
    await t.db.pool.query('ANALYZE bulk_work.jobs; ANALYZE bulk_work.recipients');

    const log: Parameters<typeof measuredPool>[1] = [];
    const pool = measuredPool(t.db.pool, log);
    // flushGraceMs: the outcome batch written "now" is not flushed by this sweep
    const first = await sweepBulkLeases({ ...services, pool } as Services, { purgePerSweep: 10_000, flushGraceMs: 3_600_000 });
    expect(first).toMatchObject({ purgedRecipients: 10_000, purgedJobs: 0 });
    const deletes = log.filter((s) => s.sql.startsWith('DELETE FROM bulk_work.recipients'));
    expect(deletes.map((d) => d.rowCount)).toEqual([5_000, 5_000]);
    // each delete reads its 5,000 rows (and their addresses), not the other bulks' work rows
    expect(deletes.map((d) => d.scans.filter((x) => x.scan.startsWith('Seq Scan') && x.rows > 0))).toEqual([[], []]);
    expect(deletes.map((d) => d.scans.reduce((n, x) => n + x.rows, 0))).toEqual([10_000, 10_000]);
    const second = await sweepBulkLeases({ ...services, pool } as Services, { purgePerSweep: 10_000, flushGraceMs: 3_600_000 });
    expect(second).toMatchObject({ purgedRecipients: 2_000, purgedJobs: 1 });

    const left = await t.db.pool.query<{ bulk_id: string; n: number }>(
      'SELECT bulk_id, count(*)::int AS n FROM bulk_work.recipients GROUP BY bulk_id ORDER BY n DESC',
    );
    expect(new Map(left.rows.map((r) => [r.bulk_id, r.n]))).toEqual(new Map([[live, 20_000], [recent, 3_000], [unappended, 10]]));

    log.length = 0;
    const third = await sweepBulkLeases({ ...services, pool } as Services, { flushGraceMs: 3_600_000 });
    expect(third).toMatchObject({ purgedRecipients: 0, purgedJobs: 0 });
    const read = log.flatMap((s) => s.scans).reduce((n, s) => n + s.rows, 0);
    expect(read).toBeLessThanOrEqual(10); // the unappended bulk's job (filtered) and nothing else
  });

  it('jobs finished before the upgrade (no mark) are visited once, 100 per sweep', async () => {
    const ids = await seedJobs(t.db.pool, 250, 'finished', 100 * 24 * HOUR, 940_000);
    const reports = [];
    for (let i = 0; i < 3; i++) reports.push(await sweepBulkLeases(services, { flushGraceMs: 3_600_000 }));
    expect(reports.map((r) => r.purgedJobs)).toEqual([100, 100, 50]);
    const unmarked = await t.db.pool.query(`SELECT count(*)::int AS n FROM bulk_work.jobs WHERE bulk_id = ANY($1::uuid[]) AND work_purged_at IS NULL`, [ids]);
    expect(unmarked.rows[0].n).toBe(0);
  });
});
