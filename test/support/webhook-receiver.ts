import { createServer, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { queueDeliveries } from '../../src/projections/webhooks/deliveries';
import type { Services } from '../../src/services';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { startWebhookFanOut } from '../../src/workers/webhook-fanout';
import { startWebhookSender } from '../../src/workers/webhook-sender';
import { SHOP, sendsFixture } from './sends';
import { createTestApp } from './services';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A status, or a status with headers (a promise holds the answer back). */
export type ReceiverAnswer = number | { status: number; headers: Record<string, string> };

/**
 * A real HTTP receiver on 127.0.0.1 (https with `tls`): answers with `respond` (default 204; a promise holds the
 * answer back) and records each request it answers 2xx, when it answers.
 */
export async function startReceiver(options: { tls?: { cert: string; key: string } } = {}): Promise<{
  url: (path?: string) => string;
  received: Received[];
  respond: (statusFor: (r: Received) => ReceiverAnswer | Promise<ReceiverAnswer>) => void;
  close: () => Promise<void>;
  server: Server;
}> {
  const received: Received[] = [];
  let statusFor: (r: Received) => ReceiverAnswer | Promise<ReceiverAnswer> = () => 204;
  const listener: RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const r = { path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      const answer = await statusFor(r);
      const status = typeof answer === 'number' ? answer : answer.status;
      if (status >= 200 && status < 300) received.push(r);
      res.writeHead(status, typeof answer === 'number' ? {} : answer.headers);
      res.end(status >= 300 ? 'nope' : '');
    });
  };
  const server: Server = options.tls ? createTlsServer(options.tls, listener) : createServer(listener);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path = '/hooks') => `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}${path}`,
    received,
    respond: (f) => { statusFor = f; },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
    server,
  };
}

/**
 * The set-up of the webhook worker suites: an app allowed to post to loopback over http, seeded with the sends
 * fixture, and a real receiver. `close` releases both.
 */
export async function startWebhookTestBed() {
  const t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_URLS: 'true', WEBHOOKS_ALLOW_HTTP: 'true' } });
  await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  const receiver = await startReceiver();
  return {
    t,
    receiver,
    /** registers an endpoint of the sends fixture's SHOP for `message.sent`, posting to `path` on the receiver */
    register: async (path: string): Promise<{ id: string }> => {
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-endpoints/', headers: { 'x-api-key': SHOP.key }, payload: { url: receiver.url(path), event_types: ['message.sent'] } });
      if (res.statusCode !== 201) throw new Error(`endpoint registration: ${res.statusCode} ${res.body}`);
      return res.json() as { id: string };
    },
    /** queues `count` message.sent deliveries to the endpoint, due at `now` (webhook ids `msg_<prefix><i>`) */
    queue: (endpointId: string, count: number, prefix: string, now = t.services.now()) =>
      queueDeliveries(t.db.pool, Array.from({ length: count }, (_, i) => ({
        endpointId, companyId: SHOP.companyId, webhookId: `msg_${prefix}${i}`, eventType: 'message.sent',
        payload: JSON.stringify({ type: 'message.sent', timestamp: now.toISOString(), data: { i } }),
      })), now),
    close: async () => {
      await receiver.close();
      await t.close();
    },
  };
}

export type WebhookTestBed = Awaited<ReturnType<typeof startWebhookTestBed>>;

/** Starts a webhook test bed before the suite (handing it to `ready`) and closes it after. */
export function useWebhookTestBed(ready: (bed: WebhookTestBed) => void): void {
  let bed: WebhookTestBed | undefined;
  beforeAll(async () => {
    bed = await startWebhookTestBed();
    ready(bed);
  });
  afterAll(() => bed?.close());
}

/**
 * Everything that turns provider statuses and bulk sends into client webhooks, started on `services` (the delivery
 * consumer, a bulk dispatcher, the fan-out and the sender, fast polls) with a real receiver; `stop` stops them all.
 */
export async function startWebhookPipeline(services: Services) {
  const consumer = await startDeliveryConsumer(services, { ownerGraceMs: 300, ownerWaitMs: 50 });
  const dispatcher = new BulkDispatcher(services, { pollMs: 20, sleep: async () => undefined });
  dispatcher.start();
  const workers = [startWebhookFanOut(services, { gatherMs: 5, pollMs: 50 }), startWebhookSender(services, { pollMs: 20 })];
  const receiver = await startReceiver();
  return {
    receiver,
    stop: async () => {
      for (const w of workers) await w.stop();
      await dispatcher.stop();
      await consumer.stop();
      await receiver.close();
    },
  };
}
