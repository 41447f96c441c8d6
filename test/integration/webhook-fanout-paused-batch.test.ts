import { START } from '../../src/ports/event-store';
import type { Services } from '../../src/services';
import { fanOutBatch } from '../../src/workers/webhook-fanout';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// The fan-out of one process (P) paused mid-batch (SIGSTOP, a VM freeze): it holds the fan-out's session lock, has
// read its checkpoint and the batch's events, and waits (here: for the read models, held by a hook). Postgres ends
// the paused holder's session once it is idle for SESSION_LOCK_IDLE_TIMEOUT_MS (src/shared/tx.ts; ended here at once
// with pg_terminate_backend, as idle_session_timeout ends it), and another process's fan-out (Q) takes the batch and
// the ones after it. P, resumed, must not queue its batch beside Q's nor move the checkpoint back: each event is
// queued once per endpoint, and posted once.

let bed: WebhookTestBed;
useWebhookTestBed((b) => { bed = b; });

const LOCK = 'webhooks:fanout';

const send = async (recipient: string) => {
  const res = await bed.t.app.inject({
    method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
    payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: recipient },
  });
  expect(res.statusCode).toBe(200);
};
const checkpoint = async () =>
  (await bed.t.db.pool.query<{ position: string }>(`SELECT position FROM webhooks.fanout_checkpoint WHERE name = 'fanout'`)).rows[0].position;
/** the backend holding the fan-out's session lock (an advisory lock on one bigint: its low 32 bits in objid) */
const lockHolder = async () =>
  (await bed.t.db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
        AND objid::bigint = (hashtext($1)::bigint & 4294967295) AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [LOCK])).rows[0]?.pid;

it("a fan-out paused mid-batch past its lock's idle bound: the other process fans out; resumed, it queues nothing twice and keeps the checkpoint", async () => {
  const ep = await bed.register('/fanout-paused');
  await bed.t.db.pool.query('INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ($1, $2) ON CONFLICT DO NOTHING', ['fanout', START]);
  await send('+5491155550201');
  await send('+5491155550202');

  // P: its batch stops when it waits for the read models (the lock held, the events read)
  let resume!: () => void;
  const paused = new Promise<void>((r) => { resume = r; });
  let reachedPause = false;
  const runner = bed.t.services.runner;
  const pausedRunner = new Proxy(runner, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (prop === 'waitFor') return async (...args: Parameters<typeof runner.waitFor>) => { reachedPause = true; await paused; return runner.waitFor(...args); };
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const P: Services = { ...bed.t.services, runner: pausedRunner };
  const pBatch = fanOutBatch(P, 1000).then((n) => ({ n }), (err: Error) => ({ err }));
  await waitUntil(async () => reachedPause && (await lockHolder()) !== undefined, 10_000, "P's batch paused holding the lock");
  // Q cannot fan out meanwhile
  expect(await fanOutBatch(bed.t.services, 1000)).toBe(0);
  // P's paused session ended by Postgres (idle_session_timeout)
  await bed.t.db.pool.query('SELECT pg_terminate_backend($1)', [await lockHolder()]);

  // Q fans out P's batch, and one more event after it
  await waitUntil(async () => (await fanOutBatch(bed.t.services, 1000)) > 0, 10_000, "Q's batch");
  await send('+5491155550203');
  await waitUntil(async () => (await fanOutBatch(bed.t.services, 1000)) > 0, 10_000, "Q's next batch");
  const qCheckpoint = await checkpoint();

  resume();
  const p = await pBatch;
  expect(p).toHaveProperty('err'); // its lock's session is gone: the batch fails, to be tried again from the checkpoint
  expect(await checkpoint()).toBe(qCheckpoint);
  // P's next batch (its loop tries again) finds nothing left
  expect(await fanOutBatch(bed.t.services, 1000)).toBe(0);

  const rows = (await bed.t.db.pool.query<{ webhook_id: string }>('SELECT webhook_id FROM webhooks.deliveries WHERE endpoint_id = $1', [ep.id])).rows;
  expect(rows).toHaveLength(3);
  expect(new Set(rows.map((r) => r.webhook_id)).size).toBe(3);
  const sender = startWebhookSender(bed.t.services, { pollMs: 20 });
  try {
    await waitUntil(async () => (await bed.t.db.pool.query(
      `SELECT 1 FROM webhooks.deliveries WHERE endpoint_id = $1 AND status = 'succeeded'`, [ep.id])).rows.length === 3, 20_000, 'three delivered');
  } finally {
    await sender.stop();
  }
  const ids = bed.receiver.received.filter((r) => r.path === '/fanout-paused').map((r) => r.headers['webhook-id']);
  expect(ids).toHaveLength(3);
  expect(new Set(ids).size).toBe(3);
});
