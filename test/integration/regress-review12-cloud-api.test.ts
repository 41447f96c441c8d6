// Review 12 of c92474f (three defects, fixed 2026-11-27 evening; the tests marked "DEFECT" fail on c92474f; the others pin behaviour found sound).
// 1. (regression of c92474f's new rule)
// A 502/504 from a gateway whose JSON body has an `error` member that is not the Graph API's error object (envoy,
// Kong, API gateways: `{"error": "upstream request timeout"}`, `{"error": {"message": "Bad Gateway"}}`) is taken
// for "the provider's own error body": it is retried, so a message that got through is sent again.
// 2. (c92474f made `invalid_response` "may have reached" in the port, not in the bulk's OUTCOME_UNKNOWN_CODES): a bulk
// recipient whose 2xx named no message id is a definite failure there, its quota reservation given back.
// 3. (older than c92474f) a TLS handshake the peer cut sent nothing, yet is `connection_lost` (not retried; a keyed
// send answers OUTCOME_UNKNOWN, a bulk recipient stays failed with an unknown outcome).
import { createServer as createTcpServer } from 'node:net';
import { outcomeUnknown } from '../../src/events/bulk';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CloudApiProvider, type CloudApiProviderOptions } from '../../src/adapters/provider/cloud-api';
import { mayHaveReachedProvider, ProviderError } from '../../src/ports/provider';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let handler: Handler;
let received: number;
let server: Server;
let baseUrl: string;
const made: CloudApiProvider[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    received++;
    req.resume().on('end', () => handler(req, res));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await Promise.all(made.map((p) => p.close()));
  server.closeAllConnections();
  await new Promise<void>((ok) => server.close(() => ok()));
});
beforeEach(() => {
  received = 0;
});

const request = { phoneNumberId: '109876543210001', to: '+5491155551234', template: 'welcome', language: 'es', components: [], clientReference: 'send-1' };
const provider = (o: Partial<CloudApiProviderOptions> = {}) => {
  const p = new CloudApiProvider({ baseUrl, apiVersion: 'v21.0', accessToken: 'secret-token-xyz', maxAttempts: 3, baseDelayMs: 1, sleep: async () => {}, ...o });
  made.push(p);
  return p;
};

async function failure(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

const answer = (status: number, body: string) => {
  handler = (_req, res) => res.writeHead(status, { 'content-type': 'application/json' }).end(body);
};

describe('review 12: gateway answers that are not the Graph error body', () => {
  it.each([
    [504, '{"error":"upstream request timeout"}'],
    [502, '{"error":{"message":"Bad Gateway"}}'],
    [502, '{"error":"Bad Gateway","status":502}'],
  ])('DEFECT: a %i with %s may have reached the provider: sent once, not retried', async (status, body) => {
    answer(status, body);
    const err = await failure(provider().sendTemplate(request));
    expect({ sent: received, reached: mayHaveReachedProvider(err) }).toEqual({ sent: 1, reached: true });
  });

  it('sound: a 502 with the Graph error body (code 131000) is retried, as documented', async () => {
    answer(502, '{"error":{"message":"Something went wrong","type":"OAuthException","code":131000,"fbtrace_id":"A"}}');
    const err = await failure(provider().sendTemplate(request));
    expect({ sent: received, code: err.code, reached: mayHaveReachedProvider(err) }).toEqual({ sent: 3, code: '131000', reached: false });
  });

  it('sound: a 429 whose Retry-After is longer than the backoff ends the call at once, retryable, not "may have reached"', async () => {
    handler = (_req, res) => res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '30' })
      .end('{"error":{"message":"rate","code":130429}}');
    const slept: number[] = [];
    const err = await failure(provider({ sleep: async (ms) => void slept.push(ms) }).sendTemplate(request));
    expect({ sent: received, slept, retryable: err.retryable, reached: mayHaveReachedProvider(err) }).toEqual({ sent: 1, slept: [], retryable: true, reached: false });
  });
});

describe('review 12: the port and the bulk agree on "may have reached"', () => {
  it('DEFECT: a 2xx without a message id (invalid_response) is "may have reached" in the port and outcome-unknown in the bulk', () => {
    const err = new ProviderError('invalid_response', 'provider answered HTTP 200 with an answer without a message id', false, { httpStatus: 200 });
    expect({ port: mayHaveReachedProvider(err), bulk: outcomeUnknown({ code: err.code, interrupted: false }) }).toEqual({ port: true, bulk: true });
  });
});

describe('review 12: a connection that was never made', () => {
  it('DEFECT: a TLS handshake the peer cuts sent nothing: network_error, retried', async () => {
    let connections = 0;
    const tcp = createTcpServer((s) => {
      connections++;
      s.once('data', () => s.destroy()); // the ClientHello arrives; the handshake is cut
    });
    await new Promise<void>((ok) => tcp.listen(0, '127.0.0.1', ok));
    try {
      const p = provider({ baseUrl: `https://127.0.0.1:${(tcp.address() as AddressInfo).port}` });
      const err = await failure(p.sendTemplate(request));
      expect({ code: err.code, reached: mayHaveReachedProvider(err), connections }).toEqual({ code: 'network_error', reached: false, connections: 3 });
    } finally {
      await new Promise<void>((ok) => tcp.close(() => ok()));
    }
  });
});
