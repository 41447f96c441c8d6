import type { Pool } from 'pg';
import { purgeExpiredSetAside } from '../../src/projections/webhooks/deliveries';
import { purgeExpiredWebhookLog } from '../../src/workers/webhook-retention';
import { SHOP } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// Review 22 (growth after a year, docs/growth.md; docs/webhooks.md, "Retention"): an endpoint disabled (by the
// client, a 410 or 5 days of failures) and then neither enabled again nor deleted kept its set-aside deliveries for
// good: pending, so the retention purge never deleted them. Now those queued more than WEBHOOKS_RETENTION_DAYS (30)
// ago are deleted, in batches, found through the partial index deliveries_set_aside (migration 0019). Pending
// deliveries of enabled endpoints are still never deleted; one in a sender's hands is left to its record.

const DAY_MS = 86_400_000;
const BASE = '/api/v1/webhook-endpoints/';

interface PlanNode { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; 'Actual Rows': number; 'Actual Loops': number; 'Rows Removed by Filter'?: number; Plans?: PlanNode[] }

/** Rows of webhooks.deliveries the plan's scans read (returned or filtered out, every loop), with the scans' names. */
function scansOf(node: PlanNode, seen: Array<{ scan: string; rows: number }> = []): Array<{ scan: string; rows: number }> {
  if (node['Relation Name'] === 'deliveries' && /Scan/.test(node['Node Type'])) {
    seen.push({ scan: `${node['Node Type']}${node['Index Name'] ? ` (${node['Index Name']})` : ''}`, rows: (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] });
  }
  for (const child of node.Plans ?? []) scansOf(child, seen);
  return seen;
}

describe('retention of deliveries set aside while their endpoint is disabled', () => {
  let t: WebhookTestBed['t'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, register, queue } = bed));

  const patch = async (id: string, enabled: boolean) => {
    const res = await t.app.inject({ method: 'PATCH', url: `${BASE}${id}/`, headers: { 'x-api-key': SHOP.key }, payload: { enabled } });
    expect(res.statusCode).toBe(200);
  };
  const deliveriesOf = async (endpointId: string) =>
    (await t.db.pool.query<{ webhook_id: string; status: string; set_aside: boolean }>(
      `SELECT webhook_id, status, next_attempt_at IS NULL AS set_aside FROM webhooks.deliveries WHERE endpoint_id = $1 ORDER BY webhook_id`, [endpointId],
    )).rows;
  const daysAgo = (days: number) => new Date(t.services.now().getTime() - days * DAY_MS);

  it('deletes set-aside deliveries queued more than the retention ago; younger ones, enabled endpoints\' and those in flight stay', async () => {
    const disabled = await register('/set-aside-disabled');
    const enabled = await register('/set-aside-enabled');
    await queue(disabled.id, 3, 'old', daysAgo(31));
    await queue(disabled.id, 2, 'young', daysAgo(29));
    await queue(disabled.id, 1, 'inflight', daysAgo(31));
    await queue(enabled.id, 2, 'overdue', daysAgo(31)); // no sender running: pending and due, never set aside
    await patch(disabled.id, false); // the client disables it: its queued deliveries are set aside
    // one of them is in a sender's hands: claimed a minute ahead before the endpoint was disabled
    await t.db.pool.query(`UPDATE webhooks.deliveries SET claimed_until = $2 WHERE endpoint_id = $1 AND webhook_id = 'msg_inflight0'`,
      [disabled.id, new Date(t.services.now().getTime() + 60_000)]);
    expect((await deliveriesOf(disabled.id)).every((d) => d.status === 'pending' && d.set_aside)).toBe(true);

    const report = await purgeExpiredWebhookLog(t.services, { batchSize: 2 }); // two batches
    expect(report).toEqual({ skipped: false, attempts: 0, deliveries: 3, orphaned: 0 });
    expect(await deliveriesOf(disabled.id)).toEqual([
      { webhook_id: 'msg_inflight0', status: 'pending', set_aside: true },
      { webhook_id: 'msg_young0', status: 'pending', set_aside: true },
      { webhook_id: 'msg_young1', status: 'pending', set_aside: true },
    ]);
    expect(await deliveriesOf(enabled.id)).toEqual([
      { webhook_id: 'msg_overdue0', status: 'pending', set_aside: false },
      { webhook_id: 'msg_overdue1', status: 'pending', set_aside: false },
    ]);
    expect(await purgeExpiredWebhookLog(t.services)).toEqual({ skipped: false, attempts: 0, deliveries: 0, orphaned: 0 });

    // enabled again, what the retention kept is due at once (the one in flight stays with its sender)
    await patch(disabled.id, true);
    expect(await deliveriesOf(disabled.id)).toEqual([
      { webhook_id: 'msg_inflight0', status: 'pending', set_aside: false },
      { webhook_id: 'msg_young0', status: 'pending', set_aside: false },
      { webhook_id: 'msg_young1', status: 'pending', set_aside: false },
    ]);
  });

  it('reads only the rows it deletes, through the set-aside index, however many are set aside', async () => {
    await t.db.pool.query('DELETE FROM webhooks.deliveries'); // whatever the test before left
    const endpoint = await register('/set-aside-plan');
    await queue(endpoint.id, 3_000, 'kept', daysAgo(2));
    await queue(endpoint.id, 5, 'expired', daysAgo(40));
    await patch(endpoint.id, false);
    await t.db.pool.query('ANALYZE webhooks.deliveries');
    const plans: Array<Array<{ scan: string; rows: number }>> = [];
    const explained = new Proxy(t.db.pool, {
      get(target, prop) {
        if (prop !== 'query') {
          const v = Reflect.get(target, prop, target);
          return typeof v === 'function' ? v.bind(target) : v;
        }
        return async (text: string, values: unknown[]) => {
          const client = await target.connect();
          try {
            await client.query('BEGIN');
            const plan = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
            plans.push(scansOf(plan.rows[0]['QUERY PLAN'][0].Plan));
          } finally {
            await client.query('ROLLBACK');
            client.release();
          }
          return target.query(text, values);
        };
      },
    }) as Pool;
    const before = daysAgo(30);
    expect(await purgeExpiredSetAside(explained, before, t.services.now(), 5_000)).toBe(5);
    expect(await purgeExpiredSetAside(explained, before, t.services.now(), 5_000)).toBe(0);
    const [deleting, idle] = plans;
    const subquery = (scans: Array<{ scan: string; rows: number }>) => scans.filter((s) => !/Pkey|pkey/.test(s.scan));
    // the subquery finding them: the set-aside index, 5 rows (the first run), none past them (the second)
    expect(subquery(deleting)).toEqual([{ scan: 'Index Scan (deliveries_set_aside)', rows: 5 }]);
    expect(subquery(idle)).toEqual([{ scan: 'Index Scan (deliveries_set_aside)', rows: 0 }]);
    expect((await deliveriesOf(endpoint.id)).length).toBe(3_000);
  });
});
