import { seedFixture } from '../../src/commands/provisioning/seed';
import { createTestApp } from '../support/services';
import { invoiceVariables, SHOP, sendsFixture, waitUntil } from '../support/sends';

// The read models on GET /metrics (docs/core.md, "Projections"), on real Postgres with the projection runner:
// `switchboard_projection_lag_seconds` and `switchboard_projection_failing` per projection, read from the stored
// checkpoints at scrape time. A projection is made to fail for real: its table is renamed away under it.

type T = Awaited<ReturnType<typeof createTestApp>>;

describe('projection metrics', () => {
  let t: T;
  let clock = Date.parse('2026-03-01T10:00:00.000Z');

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(clock) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  /** the scrape's samples of one metric, by projection (after the gauges' one-second read sharing) */
  const scrape = async (metric: string): Promise<Record<string, number>> => {
    await new Promise((r) => setTimeout(r, 1_100));
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    const out: Record<string, number> = {};
    for (const line of res.body.split('\n')) {
      const m = new RegExp(`^${metric}\\{projection="([^"]+)"\\} (\\S+)$`).exec(line);
      if (m) out[m[1]] = Number(m[2]);
    }
    return out;
  };

  it('every projection at the head: lag 0, not failing', async () => {
    await t.services.runner.waitFor(await t.services.store.headPosition());
    const lag = await scrape('switchboard_projection_lag_seconds');
    const failing = await scrape('switchboard_projection_failing');
    expect(Object.keys(lag).length).toBeGreaterThan(5);
    expect(Object.keys(failing).sort()).toEqual(Object.keys(lag).sort());
    expect(new Set(Object.values(lag))).toEqual(new Set([0]));
    expect(new Set(Object.values(failing))).toEqual(new Set([0]));
  });

  it('a projection whose batch fails: failing 1, its lag the age of the event it is stuck before; 0 and 0 once it recovers', async () => {
    await t.db.pool.query('ALTER TABLE rm_sends.sends RENAME TO sends_away');
    let renamedBack = false;
    try {
      // the send's read-your-writes wait cannot finish while the sends read model fails: not awaited here
      const sent = t.app.inject({
        method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': SHOP.key },
        payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'invoice_ready', language: 'es', recipient_phone: '+5491155551234', variables: invoiceVariables, button_variables: { button_0: 'F-0001' } },
      });
      await waitUntil(async () => (await scrape('switchboard_projection_failing')).sends === 1, 20_000, 'the sends projection failing');
      clock += 120_000; // two minutes after the send's events
      const lag = await scrape('switchboard_projection_lag_seconds');
      expect(lag.sends).toBe(120);
      // the chat history, fed by the same send (its outbound message), passed it
      expect(lag.conversations).toBe(0);
      await t.db.pool.query('ALTER TABLE rm_sends.sends_away RENAME TO sends');
      renamedBack = true;
      await sent; // answered (or timed out waiting, as a client would see it while the read model failed)
      await waitUntil(async () => (await scrape('switchboard_projection_failing')).sends === 0, 20_000, 'the sends projection recovered');
      expect((await scrape('switchboard_projection_lag_seconds')).sends).toBe(0);
    } finally {
      if (!renamedBack) await t.db.pool.query('ALTER TABLE rm_sends.sends_away RENAME TO sends').catch(() => undefined);
    }
  });

  // last: it leaves the log poisoned for this database
  it('an event its schema refuses, stored behind the service\'s back: the read models show failing and its age, not a gap', async () => {
    const at = new Date(clock).toISOString();
    await t.db.pool.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
       VALUES ('send-poison', 0, gen_random_uuid(), 'TemplateSendAccepted', '{}', jsonb_build_object('eventId', gen_random_uuid(), 'correlationId', gen_random_uuid(),
               'causationId', null, 'companyId', 1, 'actor', 'test', 'at', $1::text))`,
      [at],
    );
    await waitUntil(async () => (await scrape('switchboard_projection_failing')).sends === 1, 20_000, 'the sends projection failing on the event');
    clock += 60_000;
    expect((await scrape('switchboard_projection_lag_seconds')).sends).toBe(60);
  });
});
