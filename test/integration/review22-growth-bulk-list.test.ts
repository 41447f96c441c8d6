import type { Pool } from 'pg';
import { listBulkSends } from '../../src/projections/bulk/queries';
import { createTestContext, type TestContext } from '../support/services';

// Review 22 (growth after a year, docs/growth.md; docs/bulk.md, "Listing"): GET .../bulk-sends/?page=N read every
// skipped bulk whole (an index scan of whole rows, or a bitmap scan and a sort of them) to return 10. It now skips
// over the company's index entries (bulk_sends_company holds the order's columns) and reads whole only the page's
// rows. Same rows, same order, same count; what a plan reads is counted from the statement's own EXPLAIN ANALYZE.

interface PlanNode { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; 'Actual Rows': number; 'Actual Loops': number; 'Rows Removed by Filter'?: number; Plans?: PlanNode[] }

/** Scans of rm_bulk.bulk_sends: kind, index and rows read (returned or filtered out, every loop). */
function scans(node: PlanNode, seen: Array<{ scan: string; rows: number }> = []): Array<{ scan: string; rows: number }> {
  if (node['Relation Name'] === 'bulk_sends' && /Scan/.test(node['Node Type'])) {
    seen.push({ scan: `${node['Node Type']}${node['Index Name'] ? ` (${node['Index Name']})` : ''}`, rows: (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] });
  }
  for (const child of node.Plans ?? []) scans(child, seen);
  return seen;
}

describe('the bulk sends list reads whole only the rows of its page', () => {
  let t: TestContext;
  const BULKS = 3_000;
  beforeAll(async () => {
    t = await createTestContext({ runner: false });
    const pool = t.services.pool;
    // company 1: 3,000 bulks, one every 26 minutes (a tenth PARTIAL), two with the same creation time; nine others
    await pool.query(
      `INSERT INTO rm_bulk.bulk_sends (bulk_id, task_id, company_id, number_id, phone_number_id, display_phone_number, verified_name, tier,
         template_id, template_name, language, template_status, status, submitted_recipients, total_recipients, pending_count, sent_count, created_at)
       SELECT gen_random_uuid(), 'task-' || c || '-' || i, c, 1, 'pn', '+1', 'Shop', 'TIER_1K', 1 + i % 7, 'welcome', 'es', 'APPROVED',
              CASE WHEN i % 10 = 0 THEN 'PARTIAL' ELSE 'COMPLETED' END, 500, 500, 0, 500,
              timestamptz '2025-11-01' + interval '26 minutes' * CASE WHEN i = 7 THEN 8 ELSE i END
         FROM generate_series(1, 10) c, generate_series(1, $1::int) i`, [BULKS]);
    for (let i = 0; i < 10; i++) { // all-visible, as autovacuum leaves finished bulks (a concurrent snapshot can delay it)
      await pool.query('VACUUM (ANALYZE) rm_bulk.bulk_sends');
      const v = (await pool.query(`SELECT relpages, relallvisible FROM pg_class WHERE oid = 'rm_bulk.bulk_sends'::regclass`)).rows[0];
      if (v.relallvisible >= v.relpages) break;
      await new Promise((r) => setTimeout(r, 500));
    }
  }, 120_000);
  afterAll(() => t?.close());

  const expected = async (extra = '') => (await t.services.pool.query<{ bulk_id: string }>(
    `SELECT bulk_id FROM rm_bulk.bulk_sends b WHERE company_id = 1 ${extra} ORDER BY created_at DESC, bulk_id`)).rows.map((r) => r.bulk_id);

  it('pages through the same rows in the same order, with the same count, filtered or not', async () => {
    const all = await expected();
    const seen: string[] = [];
    for (let offset = 0; offset < BULKS; offset += 250) {
      const page = await listBulkSends(t.services.pool, 1, {}, { offset, limit: 250 });
      expect(page.count).toBe(BULKS);
      expect(page.rows.every((r) => r.companyId === 1 && r.templateName === 'welcome' && r.totalRecipients === 500)).toBe(true);
      seen.push(...page.rows.map((r) => r.bulkId));
    }
    expect(seen).toEqual(all);
    const partial = await expected(`AND status = 'PARTIAL' AND template_id = 1`);
    const page = await listBulkSends(t.services.pool, 1, { status: 'PARTIAL', templateId: 1 }, { offset: 10, limit: 10 });
    expect({ count: page.count, ids: page.rows.map((r) => r.bulkId) }).toEqual({ count: partial.length, ids: partial.slice(10, 20) });
    expect((await listBulkSends(t.services.pool, 1, {}, { offset: BULKS, limit: 10 })).rows).toEqual([]);
  });

  it('the last page reads its 10 rows whole; the 2,990 it skips only from the index', async () => {
    const plans: Array<Array<{ scan: string; rows: number }>> = [];
    const explained = new Proxy(t.services.pool, {
      get(target, prop) {
        if (prop !== 'query') {
          const v = Reflect.get(target, prop, target);
          return typeof v === 'function' ? v.bind(target) : v;
        }
        return async (text: string, values: unknown[]) => {
          const plan = await target.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
          plans.push(scans(plan.rows[0]['QUERY PLAN'][0].Plan));
          return target.query(text, values);
        };
      },
    }) as Pool;
    const page = await listBulkSends(explained, 1, {}, { offset: BULKS - 10, limit: 10 });
    expect(page.rows.map((r) => r.bulkId)).toEqual((await expected()).slice(-10));
    const [, rows] = plans;
    expect(rows).toEqual([
      { scan: 'Index Only Scan (bulk_sends_company)', rows: BULKS },
      { scan: 'Index Scan (bulk_sends_pkey)', rows: 10 },
    ]);
  });
});
