// Review 13 (2026-11-28), what a webhook attempt's `error` tells the client (docs/reliability.md, "What is logged"):
// with WEBHOOKS_PROXY_URL set and the egress proxy down, the attempt's error was the connection error's text,
// `connect ECONNREFUSED <the proxy's internal address>`, shown on GET /api/v1/webhook-endpoints/{id}/deliveries/.
// Now a fixed text per kind of failure says the proxy failed; the operator's log (the client's `logger`) has the
// error itself. An endpoint's own errors (its host, its certificate) are still shown as they are.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebhookHttpClient } from '../../src/adapters/webhooks/http-client';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, waitUntil } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

const PROXY_DOWN_TEXT = 'egress proxy failed (connection refused): the request did not reach the endpoint';

/** A loopback port nothing listens on (the proxy that is down). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', ok));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((ok) => s.close(() => ok()));
  return port;
}

describe('review13: a webhook attempt through a proxy that is down', () => {
  let t: WebhookTestBed['t'];
  let receiver: WebhookTestBed['receiver'];
  let register: WebhookTestBed['register'];
  let queue: WebhookTestBed['queue'];
  useWebhookTestBed((bed) => ({ t, receiver, register, queue } = bed));

  it("the client's error says the proxy failed, without its address; the operator's log has the error (one line per 10 s)", async () => {
    const port = await closedPort();
    const logged: Array<{ obj: any; msg?: string }> = [];
    const client = new WebhookHttpClient({
      timeoutMs: 5000, maxBodyBytes: 1000, allowPrivate: true, proxyUrl: `http://127.0.0.1:${port}`,
      logger: { warn: (obj, msg) => void logged.push({ obj, msg }) },
    });
    try {
      const first = await client.post({ url: `${receiver.url('/r13')}`, headers: {}, body: '{}' });
      const second = await client.post({ url: `${receiver.url('/r13')}`, headers: {}, body: '{}' });
      for (const res of [first, second]) {
        expect(res).toMatchObject({ statusCode: null, failure: 'connection_error', error: PROXY_DOWN_TEXT });
        expect(res.error).not.toContain(String(port));
      }
      expect(logged).toHaveLength(1);
      expect(logged[0].msg).toMatch(/egress proxy/);
      expect((logged[0].obj.err as Error).message).toContain(`127.0.0.1:${port}`);
    } finally {
      client.close();
    }
    expect(receiver.received.filter((r) => r.path === '/r13')).toEqual([]);
  });

  it('GET .../deliveries/ shows the fixed text, not the proxy address (the sender with WEBHOOKS_PROXY_URL down, real HTTP)', async () => {
    const port = await closedPort();
    const ep = await register('/r13-page');
    const services = { ...t.services, config: { ...t.services.config, webhooks: { ...t.services.config.webhooks, proxyUrl: `http://127.0.0.1:${port}` } } };
    const sender = startWebhookSender(services, { pollMs: 10 });
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    try {
      await queue(ep.id, 1, 'r13page');
      const page = await waitUntil(async () => {
        const res = await fetch(`${address}/api/v1/webhook-endpoints/${ep.id}/deliveries/`, { headers: { 'x-api-key': SHOP.key } });
        const body = (await res.json()) as { count: number; results: Array<Record<string, unknown>> };
        return res.status === 200 && body.count >= 1 ? body : undefined;
      }, 20_000, 'an attempt on the deliveries page');
      expect(page.results[0]).toMatchObject({ status_code: null, error: PROXY_DOWN_TEXT });
      expect(JSON.stringify(page)).not.toContain(String(port));
    } finally {
      await sender.stop();
    }
  });
});
