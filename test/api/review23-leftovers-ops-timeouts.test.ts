import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { OPS_REQUEST_TIMEOUT_MS, buildOpsApp } from '../../src/http/ops-app';
import { createTestContext, type TestContext } from '../support/services';

// Review 23: the worker's ops listener (WORKER_OPS_PORT: /healthz, /readyz, /metrics) had fastify's defaults: no
// request timeout and Node's 60-s headers timeout, checked every 30 s, so a client trickling its request held a
// connection for up to 90 s, and one sending half a request then nothing as long. Its timeouts now go to Node's
// constructor as the API app's do (src/http/app.ts): 10 s for the whole request, checked every second; over a real
// socket here, with a short timeout as test/api/review22-http-protocol.test.ts uses.

const TIMEOUT_MS = 1_500;

/** Writes `head` one byte every 250 ms (never idle) and stops at the server's close; what was sent, and the answer. */
function trickle(port: number, head: string, { thenSilence = false } = {}): Promise<{ sent: number; total: number; answer: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const bytes = Buffer.from(head, 'latin1');
    let sent = thenSilence ? bytes.length : 0;
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', reject);
    if (thenSilence) socket.write(bytes);
    const drip = setInterval(() => {
      if (sent < bytes.length && socket.writable) socket.write(bytes.subarray(sent, ++sent));
    }, 250);
    socket.on('close', () => {
      clearInterval(drip);
      resolve({ sent, total: bytes.length, answer: Buffer.concat(chunks).toString('utf8') });
    });
  });
}

const statusAndBody = (answer: string) => {
  const end = answer.indexOf('\r\n\r\n');
  return { status: Number(answer.split(' ')[1]), headers: answer.slice(0, end), body: JSON.parse(answer.slice(end + 4)) };
};

describe('review 23: the worker ops listener times out a stalled request', () => {
  let ctx: TestContext;
  let ops: FastifyInstance;
  let port = 0;

  beforeAll(async () => {
    ctx = await createTestContext();
    ops = await buildOpsApp(ctx.services, { requestTimeoutMs: TIMEOUT_MS });
    await ops.listen({ port: 0, host: '127.0.0.1' });
    port = (ops.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await ops?.close();
    await ctx?.close();
  });

  it('gives Node its timeouts (the defaults, without the test option)', async () => {
    const plain = await buildOpsApp(ctx.services);
    try {
      expect(plain.server.requestTimeout).toBe(OPS_REQUEST_TIMEOUT_MS);
      expect(plain.server.headersTimeout).toBe(OPS_REQUEST_TIMEOUT_MS);
      expect(OPS_REQUEST_TIMEOUT_MS).toBe(10_000);
    } finally {
      await plain.close();
    }
  });

  it('still answers a GET sent at once', async () => {
    const { answer } = await trickle(port, 'GET /healthz HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n', { thenSilence: true });
    expect(statusAndBody(answer)).toMatchObject({ status: 200, body: { status: 'ok' } });
  });

  // One byte every 250 ms (the connection is never idle): the 183 bytes of headers take 45 s, thirty times the
  // timeout. Without the fix they arrived whole within Node's own 60-s headers timeout and /healthz answered 200.
  it('headers trickling in past the timeout: 408 {error} and the connection closed before they are whole', async () => {
    const head = `GET /healthz HTTP/1.1\r\nHost: h\r\nX-Slow: ${'x'.repeat(120)}\r\nConnection: close\r\n\r\n`;
    const { sent, total, answer } = await trickle(port, head);
    expect(sent).toBeLessThan(total);
    const parsed = statusAndBody(answer);
    expect(parsed).toMatchObject({ status: 408, body: { error: 'the request was not received in time' } });
    expect(parsed.headers).toMatch(/\r\nConnection: close/i);
  }, 60_000);

  it('half a request, then nothing: 408 {error} and the connection closed', async () => {
    const { answer } = await trickle(port, 'GET /metrics HTTP/1.1\r\nHost: h\r\n', { thenSilence: true });
    expect(statusAndBody(answer)).toMatchObject({ status: 408, body: { error: 'the request was not received in time' } });
  }, 60_000);
});
