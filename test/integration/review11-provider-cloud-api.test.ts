import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { CloudApiProvider, type CloudApiProviderOptions } from '../../src/adapters/provider/cloud-api';
import { mayHaveReachedProvider, ProviderError } from '../../src/ports/provider';

// Review 11: the Cloud API adapter against local HTTP servers standing in for the provider, in the ways a real
// one (or what stands in front of it) can answer: a cut or stalled 2xx body, a redirect, a huge body, 429s.

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let handler: Handler;
let received: Array<{ url: string; authorization?: string }>;
let server: Server;
let baseUrl: string;

const listen = async (s: { listen(port: number, host: string, cb: () => void): unknown; address(): unknown }) => {
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', ok));
  return (s.address() as AddressInfo).port;
};

beforeAll(async () => {
  server = createServer((req, res) => {
    received.push({ url: req.url!, authorization: req.headers.authorization });
    req.resume().on('end', () => handler(req, res));
  });
  baseUrl = `http://127.0.0.1:${await listen(server)}`;
});
afterAll(() => {
  server.closeAllConnections();
  return new Promise<void>((ok) => server.close(() => ok()));
});
beforeEach(() => {
  received = [];
});

const request = { phoneNumberId: '109876543210001', to: '+5491155551234', template: 'welcome', language: 'es', components: [], clientReference: 'send-1' };
const provider = (o: Partial<CloudApiProviderOptions> = {}) =>
  new CloudApiProvider({ baseUrl, apiVersion: 'v21.0', accessToken: 'secret-token-xyz', maxAttempts: 3, baseDelayMs: 1, sleep: async () => {}, ...o });

async function failure(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

describe('cloud-api adapter, review 11', () => {
  it('a 2xx whose body is cut off was accepted by the provider: connection_lost (may have reached), not retried', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '200' });
      res.write('{"messaging_product":"whatsapp","messages":[{"id":"wamid.');
      setTimeout(() => res.socket?.destroy(), 50);
    };
    const err = await failure(provider().sendTemplate(request));
    expect({ code: err.code, retryable: err.retryable, reached: mayHaveReachedProvider(err) }).toEqual({ code: 'connection_lost', retryable: true, reached: true });
    expect(received).toHaveLength(1);
  });

  it('a 2xx whose body stalls past the timeout: timeout (may have reached), not retried', async () => {
    const stalled: ServerResponse[] = [];
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"messages":[');
      stalled.push(res);
    };
    const err = await failure(provider({ timeoutMs: 500 }).sendTemplate(request));
    stalled.forEach((r) => r.destroy());
    expect({ code: err.code, retryable: err.retryable, reached: mayHaveReachedProvider(err) }).toEqual({ code: 'timeout', retryable: true, reached: true });
    expect(received).toHaveLength(1);
  });

  it('a redirect is not followed: the message is not posted again elsewhere (nor the token sent there)', async () => {
    const elsewhere: Array<string | undefined> = [];
    const other = createServer((req, res) => {
      elsewhere.push(req.headers.authorization);
      req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"messages":[{"id":"wamid.ELSEWHERE"}]}'));
    });
    const port = await listen(other);
    try {
      for (const status of [307, 308, 302]) {
        handler = (_req, res) => res.writeHead(status, { location: `http://127.0.0.1:${port}/v21.0/x/messages` }).end();
        const err = await failure(provider().sendTemplate(request));
        expect({ code: err.code, retryable: err.retryable }).toEqual({ code: `http_${status}`, retryable: false });
      }
      expect(elsewhere).toEqual([]);
      expect(received).toHaveLength(3);
    } finally {
      other.closeAllConnections();
      await new Promise<void>((ok) => other.close(() => ok()));
    }
  });

  it.each([['with', true], ['without', false]])('a huge 2xx body (%s Content-Length) is not read whole: the adapter stops reading, invalid_response', async (_w, withLength) => {
    const total = 64 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let written = 0;
    let closedEarly: Promise<boolean> = Promise.resolve(false);
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', ...(withLength ? { 'content-length': String(total) } : {}) });
      closedEarly = new Promise((ok) => {
        res.on('close', () => ok(written < total));
        const pump = () => {
          while (written < total) {
            written += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
      });
    };
    const err = await failure(provider({ timeoutMs: 120_000 }).sendTemplate(request));
    expect({ code: err.code, retryable: err.retryable, reached: mayHaveReachedProvider(err) }).toEqual({ code: 'invalid_response', retryable: false, reached: true });
    expect(err.message).toBe('provider answered HTTP 200 with an answer over 1048576 bytes');
    expect(await closedEarly).toBe(true);
  }, 180_000);

  it('a 200 that is not JSON, or has no message id, is invalid_response, not retried', async () => {
    for (const answer of ['<html>ok</html>', '{"messages":[]}', '']) {
      received = [];
      handler = (_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(answer);
      const err = await failure(provider().sendTemplate(request));
      // accepted (2xx) without an id: the message may be out, so a keyed send's outcome is unknown, not a refusal
      expect({ code: err.code, retryable: err.retryable, reached: mayHaveReachedProvider(err), message: err.message })
        .toEqual({ code: 'invalid_response', retryable: false, reached: true, message: 'provider answered HTTP 200 with an answer without a message id' });
      expect(received).toHaveLength(1);
    }
  });

  it('a bare 502 or 504 (a gateway lost or timed out the request, which may have reached the provider) is not retried', async () => {
    for (const [status, code] of [[504, 'timeout'], [502, 'connection_lost']] as const) {
      received = [];
      handler = (_req, res) => res.writeHead(status, { 'content-type': 'text/html' }).end('<html>Gateway</html>');
      const err = await failure(provider().sendTemplate(request));
      expect({ code: err.code, retryable: err.retryable, reached: mayHaveReachedProvider(err), httpStatus: err.details?.httpStatus }).toEqual({ code, retryable: true, reached: true, httpStatus: status });
      expect(received).toHaveLength(1);
    }
  });

  it('a 5xx with the provider\'s own error body is still retried', async () => {
    let n = 0;
    handler = (_req, res) => (n++ === 0
      ? res.writeHead(504, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'Something went wrong', code: 131000 } }))
      : res.writeHead(200, { 'content-type': 'application/json' }).end('{"messages":[{"id":"wamid.AGAIN"}]}'));
    await expect(provider().sendTemplate(request)).resolves.toEqual({ providerMessageId: 'wamid.AGAIN' });
    expect(received).toHaveLength(2);
  });

  it('a 429 is retryable whatever the Graph error code in its body', async () => {
    handler = (_req, res) => res.writeHead(429, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'Calls to this api have exceeded the rate limit.', type: 'OAuthException', code: 613 } }));
    const err = await failure(provider({ maxAttempts: 1 }).sendTemplate(request));
    expect({ code: err.code, retryable: err.retryable }).toEqual({ code: '613', retryable: true });
  });

  it('a 429 or 503 whose Retry-After is longer than the planned backoff is not retried sooner', async () => {
    for (const status of [429, 503]) {
      received = [];
      handler = (_req, res) => res.writeHead(status, { 'retry-after': '120', 'content-type': 'text/plain' }).end('slow down');
      const sleeps: number[] = [];
      const err = await failure(provider({ sleep: async (ms) => { sleeps.push(ms); } }).sendTemplate(request));
      expect({ code: err.code, retryable: err.retryable, attempts: err.details?.attempts }).toEqual({ code: `http_${status}`, retryable: true, attempts: 1 });
      expect(err.message).toMatch(/Retry-After: 120/);
      expect(received).toHaveLength(1);
      expect(sleeps).toEqual([]);
    }
  });

  it('a Retry-After within the backoff is waited, then retried', async () => {
    let n = 0;
    handler = (_req, res) => (n++ === 0
      ? res.writeHead(503, { 'retry-after': '0' }).end()
      : res.writeHead(200, { 'content-type': 'application/json' }).end('{"messages":[{"id":"wamid.OK"}]}'));
    await expect(provider().sendTemplate(request)).resolves.toEqual({ providerMessageId: 'wamid.OK' });
    expect(received).toHaveLength(2);
  });

  it('a TLS handshake that never completes sent nothing: network_error (retried), not "may have reached"', async () => {
    const sockets: Socket[] = [];
    const silent = createTcpServer((s) => { sockets.push(s); s.on('error', () => undefined); });
    const port = await listen(silent);
    try {
      const p = provider({ baseUrl: `https://127.0.0.1:${port}`, maxAttempts: 2, connectTimeoutMs: 200, timeoutMs: 5_000 });
      const err = await failure(p.sendTemplate(request));
      expect({ code: err.code, retryable: err.retryable, reached: mayHaveReachedProvider(err), attempts: err.details?.attempts })
        .toEqual({ code: 'network_error', retryable: true, reached: false, attempts: 2 });
      await p.close();
    } finally {
      sockets.forEach((s) => s.destroy());
      await new Promise<void>((ok) => silent.close(() => ok()));
    }
  }, 30_000);

  it('an access token a header cannot carry is refused when the adapter is made, without the token in the message', () => {
    let message = '';
    try {
      provider({ accessToken: 'secret-token-xyz\nInjected: 1' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/access token/);
    expect(message).not.toContain('secret-token-xyz');
  });

  it('a token with a line break at its end (read from a file) is sent without it', async () => {
    handler = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"messages":[{"id":"wamid.T"}]}');
    await expect(provider({ accessToken: ' secret-token-xyz\r\n' }).sendTemplate(request)).resolves.toEqual({ providerMessageId: 'wamid.T' });
    expect(received[0].authorization).toBe('Bearer secret-token-xyz');
  });
});
