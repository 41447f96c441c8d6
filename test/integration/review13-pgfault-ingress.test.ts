import { seedFixture } from '../../src/commands/provisioning/seed';
import { signWebhook } from '../../src/shared/provider-webhook';
import { APP_SECRET, eventually, SHOP, sendsFixture, statusBody } from '../support/sends';
import { type FaultApp, startFaultApp } from './review13-pgfault-harness';

// Review 13: the provider's status webhook ingress (POST /webhooks/provider, in-process transport: the 200 is sent
// once the status is applied) while the app's Postgres connections are terminated under its append.

describe('review 13: provider status ingress under Postgres connection faults', () => {
  let t: FaultApp;
  let n = 0;
  const recipient = () => `+54911900${String(++n).padStart(5, '0')}`;

  const postStatus = (payload: object) => {
    const raw = JSON.stringify(payload);
    return t.http('POST', '/webhooks/provider', { headers: { 'x-hub-signature-256': signWebhook(APP_SECRET, raw) }, body: payload });
  };
  const sendOne = async (): Promise<string> => {
    const res = await t.http('POST', '/api/v1/platform-templates/send/', {
      key: SHOP.key, body: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: recipient() },
    });
    expect(res.status).toBe(200);
    return res.body.message_id as string;
  };
  const statusesOf = async (providerMessageId: string) =>
    (await t.db.pool.query<{ status: string }>(
      `SELECT data->>'status' AS status FROM es.events
        WHERE type = 'DeliveryStatusRecorded' AND stream_id = (SELECT stream_id FROM es.events WHERE type = 'TemplateSendAccepted' AND data->>'providerMessageId' = $1)
        ORDER BY stream_revision`,
      [providerMessageId],
    )).rows.map((r) => r.status);
  const current = async (id: string) =>
    (await t.http('GET', `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, { key: SHOP.key })).body.delivery_status.current;

  /**
   * Kills the app backends that wait on the event store's INSERT, then lets the INSERTs go: `once` (the first
   * append's), or `untilAnswered` (every try, until the request is answered: the database keeps failing). It killed
   * for a fixed 1.5 s before: on a loaded machine the transport's last try could come after the window and succeed
   * (200 where the test means a failure that lasts).
   */
  async function killingAppends(mode: 'once' | 'untilAnswered', request: () => Promise<Awaited<ReturnType<FaultApp['http']>>>) {
    const events = await t.lock('es.events', 'SHARE');
    let answered = false;
    const pending = request().finally(() => (answered = true));
    let killed = 0;
    await t.waitBlocked('%', 'store');
    const giveUp = Date.now() + 30_000; // a request never answered while it fails: let go (its answer then shows it)
    do {
      const pids = await t.blocked('%', 'store');
      if (pids.length > 0) killed += (await t.admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids])).rowCount ?? 0;
      await new Promise((r) => setTimeout(r, 10));
    } while (mode === 'untilAnswered' && !answered && Date.now() < giveUp);
    await events.release();
    return { res: await pending, killed };
  }

  beforeAll(async () => {
    t = await startFaultApp();
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });
  afterEach(() => {
    expect(t.unhandled).toEqual([]);
  });

  it('a status whose append is killed once is applied by the transport\'s retry: 200, recorded once, redelivery a no-op', async () => {
    const id = await sendOne();
    const delivered = statusBody(SHOP.number.phoneNumberId, id, 'delivered', '2026-11-28T01:00:00Z');
    const { res, killed } = await killingAppends('once', () => postStatus(delivered));
    expect(killed).toBeGreaterThan(0);
    expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: { received: 1 } });
    expect(await postStatus(delivered)).toMatchObject({ status: 200 });
    expect(await statusesOf(id)).toEqual(['delivered']);
    expect(await eventually(() => current(id), 'delivered')).toBe('delivered');
  });

  it('a status that cannot be appended while the database keeps failing is refused 503 (the provider delivers again), then applied once', async () => {
    const id = await sendOne();
    const read = statusBody(SHOP.number.phoneNumberId, id, 'read', '2026-11-28T01:00:05Z');
    const { res, killed } = await killingAppends('untilAnswered', () => postStatus(read));
    expect(killed).toBeGreaterThan(1);
    expect({ status: res.status, body: res.body }).toEqual({ status: 503, body: { error: 'notifications could not be accepted right now; retry later' } });
    // the provider's redelivery
    expect(await postStatus(read)).toMatchObject({ status: 200, body: { received: 1 } });
    expect(await postStatus(read)).toMatchObject({ status: 200 });
    expect(await statusesOf(id)).toEqual(['delivered', 'read']); // a read without delivered implies it
    // the read model follows the log (the in-process 200 means the status is in the log)
    expect(await eventually(() => current(id), 'read')).toBe('read');
  });
});
