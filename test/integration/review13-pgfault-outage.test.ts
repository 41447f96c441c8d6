import { Client } from 'pg';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { DATABASE_UNAVAILABLE_MESSAGE } from '../../src/http/errors';
import { signWebhook } from '../../src/shared/provider-webhook';
import { APP_SECRET, eventually, SHOP, sendsFixture, statusBody } from '../support/sends';
import { type FaultApp, startFaultApp } from './review13-pgfault-harness';

// Review 13: the database gone for a while at run time (every app connection terminated and no new one accepted:
// ALTER DATABASE ... ALLOW_CONNECTIONS false), then back. Every write path answers at once, in its shape, without
// details (503 DATABASE_UNAVAILABLE; until a CI run failed on it, 55000 at connect was answered 500 "internal server
// error"); the process serves on; nothing is half done; after the outage the same requests succeed once.

describe('review 13: Postgres unreachable at run time, then back', () => {
  let t: FaultApp;
  let server: Client; // on the server's own database: a database cannot disallow its own connections
  const to = '+5491177700001';

  beforeAll(async () => {
    t = await startFaultApp();
    server = new Client({ connectionString: process.env.TEST_DATABASE_URL });
    server.on('error', () => undefined);
    await server.connect();
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await server?.query(`ALTER DATABASE ${new URL(t.db.url).pathname.slice(1)} ALLOW_CONNECTIONS true`).catch(() => undefined);
    await server?.end().catch(() => undefined);
    await t?.close();
  });

  it('answers 503 DATABASE_UNAVAILABLE on every keyed write path during the outage, then each keyed retry succeeds once', async () => {
    const dbName = new URL(t.db.url).pathname.slice(1);
    const requests = {
      send: () => t.http('POST', '/api/v1/platform-templates/send/', {
        key: SHOP.key, headers: { 'idempotency-key': 'outage-send' },
        body: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: to },
      }),
      upsert: () => t.http('POST', '/api/v1/external/contacts/upsert/', { key: SHOP.key, headers: { 'idempotency-key': 'outage-upsert' }, body: { phone: '+5491177700002' } }),
      bulk: () => t.http('POST', '/api/v1/platform-templates/send-bulk/', {
        key: SHOP.key, headers: { 'idempotency-key': 'outage-bulk' },
        body: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipients: [{ phone: '+5491177700003' }] },
      }),
      endpoint: () => t.http('POST', '/api/v1/webhook-endpoints/', {
        key: SHOP.key, headers: { 'idempotency-key': 'outage-endpoint' }, body: { url: 'http://127.0.0.1:9/hook', event_types: ['message.sent'] },
      }),
    };

    const sent = await t.http('POST', '/api/v1/platform-templates/send/', {
      key: SHOP.key, body: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491177700009' },
    });
    expect(sent.status).toBe(200);
    const delivered = statusBody(SHOP.number.phoneNumberId, sent.body.message_id, 'delivered', '2026-11-28T01:00:00Z');
    const raw = JSON.stringify(delivered);
    const postStatus = () => t.http('POST', '/webhooks/provider', { headers: { 'x-hub-signature-256': signWebhook(APP_SECRET, raw) }, body: delivered });

    await server.query(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS false`);
    const terminated = await t.terminatePids();
    try {
      for (const [name, request] of Object.entries(requests)) {
        // refused at connect (55000: the database does not allow connections) or lost (a pooled connection the pool has
        // not yet seen terminated), before the route's handler ran (the key's claim): nothing done, the key given back
        const res = await request();
        expect({ name, status: res.status, retryAfter: res.headers.get('retry-after'), body: res.body })
          .toEqual({ name, status: 503, retryAfter: '5', body: { error: DATABASE_UNAVAILABLE_MESSAGE } });
      }
      // the provider's notification is refused for now (it delivers again), not acknowledged and lost
      expect(await postStatus()).toMatchObject({ status: 503, body: { error: 'notifications could not be accepted right now; retry later' } });
      // a client's mistake needs no database: still its 4xx
      expect((await t.http('POST', '/api/v1/platform-templates/send/', { body: {} })).status).toBe(401);
      expect((await t.http('GET', '/healthz')).status).toBe(200);
    } finally {
      await server.query(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS true`);
    }
    expect(t.provider.callsTo(to)).toBe(0);
    // the outage is over for the retries once the pools have seen every terminated connection end: a backend slow to
    // exit (a loaded machine) leaves its pooled client looking alive, and a retry taking it would be answered 503
    await t.poolsForget(terminated);

    expect((await requests.send()).status).toBe(200);
    expect((await requests.upsert()).status).toBe(201);
    expect((await requests.bulk()).status).toBe(202);
    expect((await requests.endpoint()).status).toBe(201);
    // the read models caught up, and each retry did its work once
    expect(await eventually(async () => t.provider.callsTo('+5491177700003'), 1)).toBe(1);
    expect(t.provider.callsTo(to)).toBe(1);
    expect((await requests.send()).headers.get('idempotent-replayed')).toBe('true');
    expect(await postStatus()).toMatchObject({ status: 200, body: { received: 1 } });
    const record = async () => (await t.http('GET', `/api/v1/platform-templates/messages/${encodeURIComponent(sent.body.message_id)}/`, { key: SHOP.key })).body?.delivery_status?.current;
    expect(await eventually(record, 'delivered')).toBe('delivered');
    expect(t.unhandled).toEqual([]);
  });
});
