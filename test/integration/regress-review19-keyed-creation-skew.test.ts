import { seedFixture } from '../../src/commands/provisioning/seed';
import { SHOP, sendsFixture } from '../support/sends';
import { createTestApp } from '../support/services';
import { anotherServeProcess } from '../support/another-process';

// Regression review 19 (2026-11-28): 3b465bb made a keyed single send's repeat judge the key's 24 h by both its own
// clock and Postgres's; the keyed creations of a bulk send, of a webhook endpoint and of a secret rotation still judged
// what the key had made (written with the first process's clock) by the repeat's clock alone. A repeat on a process a
// day ahead, after the first run crashed past its commit point (its answer never recorded), took the bulk for an
// earlier use's and created a second one (every recipient messaged twice), registered a second endpoint, or rotated
// the secret a second time (ending the previous secret's 24 h at once). Two app instances on one database.

jest.setTimeout(60_000);
const AHEAD_MS = 24 * 3600_000 + 60_000;

describe('regression review 19: keyed creations repeated on a process a day ahead, after a crash', () => {
  let a: Awaited<ReturnType<typeof createTestApp>>;
  let b: Awaited<ReturnType<typeof anotherServeProcess>>;
  beforeAll(async () => {
    a = await createTestApp({ now: () => new Date() });
    await seedFixture(a.services, sendsFixture(), { actor: 'test' });
    b = await anotherServeProcess(a.db.url, { now: () => new Date(Date.now() + AHEAD_MS) });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  /** the first run's answer lost (its process died after the commit point): the key in flight, its lease lapsed */
  const loseTheAnswer = (key: string) => a.db.pool.query(
    `UPDATE public.idempotency_keys SET state = 'in_flight', status_code = NULL, content_type = NULL, body = NULL,
      lease_until = now() - interval '1 minute' WHERE key = $1`, [key]);
  const count = async (type: string) => (await a.db.pool.query(`SELECT count(*)::int AS n FROM es.events WHERE type = $1`, [type])).rows[0].n;

  it('a keyed send-bulk creates no second bulk', async () => {
    const body = { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipients: [{ phone: '+5491177711001' }] };
    const headers = { 'x-api-key': SHOP.key, 'idempotency-key': 'rr19-bulk' };
    const first = await a.app.inject({ method: 'POST', url: '/api/v1/platform-templates/send-bulk/', headers, payload: body });
    expect(first.statusCode).toBe(202);
    await loseTheAnswer('rr19-bulk');
    const repeat = await b.app.inject({ method: 'POST', url: '/api/v1/platform-templates/send-bulk/', headers, payload: body });
    expect({ status: repeat.statusCode, bulkId: repeat.json().bulk_send_id, created: await count('BulkSendCreated') })
      .toEqual({ status: 202, bulkId: first.json().bulk_send_id, created: 1 });
  });

  it('a keyed webhook-endpoint creation registers no second endpoint; a keyed rotation rotates once', async () => {
    const body = { url: 'https://hooks.example.com/rr19', event_types: ['message.sent'] };
    const headers = { 'x-api-key': SHOP.key, 'idempotency-key': 'rr19-endpoint' };
    const first = await a.app.inject({ method: 'POST', url: '/api/v1/webhook-endpoints/', headers, payload: body });
    expect(first.statusCode).toBe(201);
    await loseTheAnswer('rr19-endpoint');
    const repeat = await b.app.inject({ method: 'POST', url: '/api/v1/webhook-endpoints/', headers, payload: body });
    expect({ status: repeat.statusCode, id: repeat.json().id, secret: repeat.json().secret, created: await count('WebhookEndpointCreated') })
      .toEqual({ status: 201, id: first.json().id, secret: first.json().secret, created: 1 });

    const rotate = `/api/v1/webhook-endpoints/${first.json().id}/rotate-secret/`;
    const rotateHeaders = { 'x-api-key': SHOP.key, 'idempotency-key': 'rr19-rotate' };
    const rotated = await a.app.inject({ method: 'POST', url: rotate, headers: rotateHeaders });
    expect(rotated.statusCode).toBe(200);
    await loseTheAnswer('rr19-rotate');
    const again = await b.app.inject({ method: 'POST', url: rotate, headers: rotateHeaders });
    expect({ status: again.statusCode, secret: again.json().secret, rotations: await count('WebhookEndpointSecretRotated') })
      .toEqual({ status: 200, secret: rotated.json().secret, rotations: 1 });
  });
});
