import { Webhook } from 'standardwebhooks';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { type Received, useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// Review of client webhooks (issue #15) against Standard Webhooks: what a receiver gets, checked with the
// `standardwebhooks` package's Webhook.verify, on real Postgres, the real sender and a real receiver.

const BASE = '/api/v1/webhook-endpoints/';

describe('review: webhook headers and signatures as a Standard Webhooks receiver sees them', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, receiver, queue } = bed));

  const api = (method: 'POST' | 'GET', url: string, payload?: object) =>
    t.app.inject({ method, url, headers: { 'x-api-key': SHOP.key }, ...(payload ? { payload } : {}) });
  const register = async (path: string) => {
    const res = await api('POST', BASE, { url: receiver.url(path), event_types: ['message.sent'] });
    expect(res.statusCode).toBe(201);
    return res.json() as { id: string; secret: string };
  };
  const verifies = (secret: string, r: Received) => {
    try {
      new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
      return true;
    } catch {
      return false;
    }
  };

  it('the test event: exact headers (integer seconds, v1,<base64>, no stray spaces), its body, verified; after a rotation two signatures, each verifying', async () => {
    const ep = await register('/review-test');
    const sender = startWebhookSender(t.services, { pollMs: 10 });
    try {
      const queued = (await api('POST', `${BASE}${ep.id}/test/`)).json();
      await waitUntil(async () => receiver.received.some((r) => r.path === '/review-test') || undefined, 10_000, 'the test event');
      const r = receiver.received.find((x) => x.path === '/review-test')!;
      const before = Math.floor(t.services.now().getTime() / 1000);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['webhook-id']).toBe(queued.webhook_id);
      expect(r.headers['webhook-id']).toMatch(/^msg_[A-Za-z0-9_-]+$/);
      expect(r.headers['webhook-timestamp']).toMatch(/^[0-9]{10}$/);
      expect(Math.abs(Number(r.headers['webhook-timestamp']) - before)).toBeLessThan(60);
      expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(new Webhook(ep.secret).verify(r.body, r.headers as Record<string, string>)).toEqual({
        type: 'webhook.test', timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), data: { endpoint_id: ep.id, message: 'test event from Switchboard' },
      });
      expect(Buffer.from(ep.secret.slice('whsec_'.length), 'base64')).toHaveLength(24);

      const rotated = (await api('POST', `${BASE}${ep.id}/rotate-secret/`)).json();
      receiver.received.length = 0;
      await api('POST', `${BASE}${ep.id}/test/`);
      await waitUntil(async () => receiver.received.some((x) => x.path === '/review-test') || undefined, 10_000, 'the second test event');
      const r2 = receiver.received.find((x) => x.path === '/review-test')!;
      expect(r2.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/);
      expect([verifies(rotated.secret, r2), verifies(ep.secret, r2)]).toEqual([true, true]);
    } finally {
      await sender.stop();
    }
  });

  // a rotation reaches the deliveries a sender already holds in the endpoint's lane (the projection notifies it)
  it('deliveries waiting in the lane when the secret is rotated go out signed with the new secret too', async () => {
    const ep = await register('/review-rotate-lane');
    let release!: () => void;
    const held = new Promise<number>((ok) => (release = () => ok(204)));
    let first = true;
    receiver.respond((r) => {
      if (r.path !== '/review-rotate-lane' || !first) return 204;
      first = false;
      return held; // the first request is held: the others wait in the lane
    });
    await queue(ep.id, 3, 'rotate-lane-');
    const sender = startWebhookSender(t.services, { pollMs: 10, endpointConcurrency: 1 });
    try {
      await waitUntil(async () => !first || undefined, 10_000, 'the first request in flight');
      const rotated = (await api('POST', `${BASE}${ep.id}/rotate-secret/`)).json();
      await new Promise((r) => setTimeout(r, 300)); // time for a change notification to reach the sender
      release();
      await waitUntil(async () => receiver.received.filter((r) => r.path === '/review-rotate-lane').length === 3 || undefined, 10_000, 'all three');
      const after = receiver.received.filter((r) => r.path === '/review-rotate-lane').slice(1);
      expect(after.map((r) => verifies(rotated.secret, r))).toEqual([true, true]);
    } finally {
      release();
      await sender.stop();
    }
  });
});
