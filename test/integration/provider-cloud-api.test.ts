import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { CloudApiProvider } from '../../src/adapters/provider/cloud-api';
import { buildComponents, type TemplateShape } from '../../src/commands/send/components';
import { ProviderError } from '../../src/ports/provider';
import { UNTRUSTED_TLS } from '../support/tls';

// A local stand-in for the provider's Graph API: records each request and answers from a queue.
interface Recorded { method: string; url: string; headers: IncomingHttpHeaders; body: unknown }
interface Answer { status: number; body: unknown }

let server: Server;
let baseUrl: string;
const requests: Recorded[] = [];
let answers: Answer[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method!, url: req.url!, headers: req.headers, body: text ? JSON.parse(text) : null });
      const a = answers.shift() ?? { status: 500, body: 'no answer queued' };
      const payload = typeof a.body === 'string' ? a.body : JSON.stringify(a.body);
      res.writeHead(a.status, { 'content-type': typeof a.body === 'string' ? 'text/plain' : 'application/json' });
      res.end(payload);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  requests.length = 0;
  answers = [];
});

const template: TemplateShape = {
  variables: [
    { name: 'banner', type: 'IMAGE', position: 1, isRequired: true, component: 'HEADER' },
    { name: 'name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
    { name: 'total', type: 'CURRENCY', position: 2, isRequired: true, component: 'BODY' },
    { name: 'due', type: 'DATE_TIME', position: 3, isRequired: true, component: 'BODY' },
    { name: 'invoice', type: 'TEXT', position: 1, isRequired: true, component: 'BUTTON' },
  ],
  buttons: [{ type: 'URL', text: 'Ver factura', url: 'https://shop.example/inv/{{1}}' }],
};
const built = buildComponents(
  template,
  { banner: 'https://cdn.example/banner.jpg', name: 'Juan', total: { amount: 1234.5, code: 'ARS' }, due: '2026-03-10' },
  { button_0: 'F-0001' },
);
if (!built.ok) throw new Error('fixture components invalid');
const request = { phoneNumberId: '109876543210001', to: '+5491155551234', template: 'invoice_ready', language: 'es', components: built.components };

const expectedBody = {
  messaging_product: 'whatsapp',
  to: '5491155551234',
  type: 'template',
  template: {
    name: 'invoice_ready',
    language: { code: 'es' },
    components: [
      { type: 'header', parameters: [{ type: 'image', image: { link: 'https://cdn.example/banner.jpg' } }] },
      {
        type: 'body',
        parameters: [
          { type: 'text', text: 'Juan' },
          { type: 'currency', currency: { fallback_value: 'ARS 1234.50', code: 'ARS', amount_1000: 1234500 } },
          { type: 'date_time', date_time: { fallback_value: '2026-03-10' } },
        ],
      },
      { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: 'F-0001' }] },
    ],
  },
};

const providerError = (code: number, message: string, subcode?: number, details?: string) => ({
  error: { message, type: 'OAuthException', code, ...(subcode ? { error_subcode: subcode } : {}), error_data: { messaging_product: 'whatsapp', details: details ?? message }, fbtrace_id: 'Az1' },
});

function provider(sleeps: number[] = []) {
  return new CloudApiProvider({
    baseUrl: `${baseUrl}/`, apiVersion: 'v21.0', accessToken: 'test-token-123',
    maxAttempts: 3, baseDelayMs: 100, random: () => 1, sleep: async (ms) => { sleeps.push(ms); },
  });
}

async function refusal(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

describe('cloud-api provider against a local HTTP server', () => {
  it('posts the template with header media, TEXT/CURRENCY/DATE_TIME body and a URL button; returns messages[0].id', async () => {
    answers.push({ status: 200, body: { messaging_product: 'whatsapp', contacts: [{ input: '5491155551234', wa_id: '5491155551234' }], messages: [{ id: 'wamid.HBgLNTQ5MTE1NTU1MTIzNBUCABEYEjQ=' }] } });
    await expect(provider().sendTemplate(request)).resolves.toEqual({ providerMessageId: 'wamid.HBgLNTQ5MTE1NTU1MTIzNBUCABEYEjQ=' });
    expect(requests).toHaveLength(1);
    const [r] = requests;
    expect(r.method).toBe('POST');
    expect(r.url).toBe('/v21.0/109876543210001/messages');
    expect(r.headers.authorization).toBe('Bearer test-token-123');
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.body).toEqual(expectedBody);
  });

  it('131026 (undeliverable) is refused at once, not retried', async () => {
    answers.push({ status: 400, body: providerError(131026, 'Message undeliverable', undefined, 'Message Undeliverable.') });
    const sleeps: number[] = [];
    const err = await refusal(provider(sleeps).sendTemplate(request));
    expect({ code: err.code, retryable: err.retryable, message: err.message }).toEqual({
      code: '131026', retryable: false, message: 'Message undeliverable: Message Undeliverable.',
    });
    expect(err.details).toEqual({ type: 'OAuthException', subcode: undefined, httpStatus: 400, attempts: 1 });
    expect(requests).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it('130429 (throughput) is retried with backoff, then the success is returned', async () => {
    answers.push({ status: 400, body: providerError(130429, 'Rate limit hit') });
    answers.push({ status: 200, body: { messages: [{ id: 'wamid.SECOND' }] } });
    const sleeps: number[] = [];
    await expect(provider(sleeps).sendTemplate(request)).resolves.toEqual({ providerMessageId: 'wamid.SECOND' });
    expect(requests).toHaveLength(2);
    expect(requests[1].body).toEqual(expectedBody);
    expect(sleeps).toEqual([100]);
  });

  it('132001 (template does not exist) is not retryable', async () => {
    answers.push({ status: 404, body: providerError(132001, 'Template name does not exist in the translation', 2494073, 'template name (invoice_ready) does not exist in es') });
    const err = await refusal(provider().sendTemplate(request));
    expect({ code: err.code, retryable: err.retryable, message: err.message }).toEqual({
      code: '132001',
      retryable: false,
      message: 'Template name does not exist in the translation: template name (invoice_ready) does not exist in es',
    });
    expect(err.details?.subcode).toBe('2494073');
    expect(requests).toHaveLength(1);
  });

  it('HTTP 500 is retried up to the bound with growing delays, then reported as retryable', async () => {
    answers.push({ status: 500, body: 'upstream exploded' }, { status: 500, body: 'upstream exploded' }, { status: 500, body: 'upstream exploded' });
    const sleeps: number[] = [];
    const err = await refusal(provider(sleeps).sendTemplate(request));
    expect({ code: err.code, retryable: err.retryable, attempts: err.details?.attempts }).toEqual({ code: 'http_500', retryable: true, attempts: 3 });
    expect(requests).toHaveLength(3);
    expect(sleeps).toEqual([100, 200]);
  });

  it('a 5xx with a provider error body keeps the provider code and is retryable', async () => {
    answers.push({ status: 503, body: providerError(131000, 'Something went wrong') }, { status: 200, body: { messages: [{ id: 'wamid.OK' }] } });
    await expect(provider().sendTemplate(request)).resolves.toEqual({ providerMessageId: 'wamid.OK' });
    expect(requests).toHaveLength(2);
  });

  it('declares the longest a call can take: every attempt up to its timeout, and the longest backoffs', () => {
    const options = { baseUrl: 'http://127.0.0.1:1', apiVersion: 'v21.0', accessToken: 't' };
    expect(new CloudApiProvider(options).maxCallMs).toBe(3 * 10_000 + 250 + 500);
    expect(new CloudApiProvider({ ...options, maxAttempts: 5, timeoutMs: 2_000, baseDelayMs: 1_000, maxDelayMs: 3_000 }).maxCallMs)
      .toBe(5 * 2_000 + 1_000 + 2_000 + 3_000 + 3_000);
  });

  it('a provider whose TLS certificate is refused was never sent anything: a retryable network error, retried', async () => {
    const tls = createTlsServer(UNTRUSTED_TLS, (_req, res) => res.end('{}'));
    await new Promise<void>((ok) => tls.listen(0, '127.0.0.1', ok));
    try {
      const p = new CloudApiProvider({ baseUrl: `https://127.0.0.1:${(tls.address() as AddressInfo).port}`, apiVersion: 'v21.0', accessToken: 't', maxAttempts: 2, sleep: async () => {} });
      const err = await refusal(p.sendTemplate(request));
      expect({ code: err.code, retryable: err.retryable, attempts: err.details?.attempts }).toEqual({ code: 'network_error', retryable: true, attempts: 2 });
      expect(err.message).toMatch(/^provider unreachable: its TLS certificate was refused \([A-Z_]*CERT[A-Z_]*\)$/);
    } finally {
      tls.closeAllConnections();
      await new Promise<void>((ok) => tls.close(() => ok()));
    }
  });

  it('a connection lost after the request was written is connection_lost: reported retryable, never retried (the provider may have the message)', async () => {
    const dropping = createServer((req) => req.on('data', () => undefined).on('end', () => req.socket.destroy()));
    await new Promise<void>((ok) => dropping.listen(0, '127.0.0.1', ok));
    let received = 0;
    dropping.on('request', () => received++);
    try {
      const p = new CloudApiProvider({ baseUrl: `http://127.0.0.1:${(dropping.address() as AddressInfo).port}`, apiVersion: 'v21.0', accessToken: 't', maxAttempts: 3, sleep: async () => {} });
      const err = await refusal(p.sendTemplate(request));
      expect({ code: err.code, retryable: err.retryable, attempts: err.details?.attempts }).toEqual({ code: 'connection_lost', retryable: true, attempts: 1 });
      expect(err.message).toMatch(/^connection to the provider lost: /);
      expect(received).toBe(1);
    } finally {
      await new Promise<void>((ok) => dropping.close(() => ok()));
    }
  });

  it('a refused connection is a retryable network error', async () => {
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((ok) => closed.close(() => ok()));
    const p = new CloudApiProvider({ baseUrl: `http://127.0.0.1:${port}`, apiVersion: 'v21.0', accessToken: 't', maxAttempts: 2, sleep: async () => {} });
    const err = await refusal(p.sendTemplate(request));
    expect({ code: err.code, retryable: err.retryable, attempts: err.details?.attempts }).toEqual({ code: 'network_error', retryable: true, attempts: 2 });
    expect(err.message).toMatch(/^provider unreachable: .*ECONNREFUSED/);
  });
});
