import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { onRequestHookHandler } from 'fastify';
import { ApiError } from './errors';

// What the HTTP layer refuses before, or instead of, a route's work, answered in the spec's {error} shape
// (docs/reliability.md, "Limits"). The app factory wires each one.

/**
 * Errors of Node's HTTP parser, raised before any route exists (a malformed request line or header, conflicting
 * Content-Length headers, a bad chunk, headers over the size limit, a request not received in time): answered in
 * the plain {error} shape instead of fastify's {error, message, statusCode}, then the connection is closed.
 * Fastify's `clientErrorHandler`.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, error] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'Request Timeout', 'the request was not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large', 'the request headers are too large']
        : [400, 'Bad Request', 'the HTTP request is malformed'];
  const body = JSON.stringify({ error });
  if (socket.writable && !answeredAlready(socket)) {
    socket.write(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
}

/**
 * Whether the request whose bytes failed to parse has had (or begun) its answer: a route may answer before the body
 * arrives (415 without a Content-Type), and Node goes on reading the body; an error there must not add a second
 * answer, which the client would take for the answer to its next request. Read from Node's own fields (the request
 * being parsed, the response in flight), as Node's default handler does; without them the answer is written.
 */
function answeredAlready(socket: Duplex): boolean {
  const node = socket as Duplex & { _httpMessage?: ServerResponse | null; parser?: { incoming?: IncomingMessage | null } | null };
  if (node._httpMessage) return node._httpMessage.headersSent;
  // no response in flight: the request being parsed, if any, was answered already
  return Boolean(node.parser?.incoming);
}

/** An Expect other than 100-continue never reaches a route (Node would answer 417 with an empty body). The server's `checkExpectation` listener. */
export function answerUnsupportedExpectation(request: IncomingMessage, response: ServerResponse): void {
  const body = JSON.stringify({ error: `Expect '${String(request.headers.expect).slice(0, 100)}' is not supported` });
  response.writeHead(417, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' }).end(body);
}

/** CONNECT (a proxy's method) never reaches a route: Node would close the connection without a word. The server's `connect` listener. */
export function answerConnect(_request: IncomingMessage, socket: Duplex): void {
  const body = JSON.stringify({ error: 'the CONNECT method is not supported' });
  if (socket.writable) {
    socket.write(`HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.end();
}

/**
 * An HTTP/1.1 request without a Host header is 400 (RFC 9112, section 3.2), in the route's error shape: Node's own
 * check (turned off in the app factory) answers it with an empty body. So is one with more than one Host header
 * (the same section): Node keeps the first and drops the others, and a proxy in front may have read another.
 */
export const requireHostHeader: onRequestHookHandler = (request, _reply, done) => {
  if (hostHeadersIn(request.raw.rawHeaders) > 1) return done(new ApiError(400, 'the Host header must be sent once'));
  if (request.raw.headers.host !== undefined || request.raw.httpVersion !== '1.1') return done();
  done(new ApiError(400, 'the Host header is required'));
};

/** How many Host headers `rawHeaders` (name, value, name, value, ...) holds: cheaper than `headersDistinct`, which copies every header. */
function hostHeadersIn(rawHeaders: readonly string[]): number {
  let hosts = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].length === 4 && rawHeaders[i].toLowerCase() === 'host') hosts++;
  return hosts;
}

/**
 * Bodies are parsed as sent, as UTF-8 JSON: a compressed one (Content-Encoding gzip, br, ...) would be read as broken
 * JSON, and one declared in another charset (`charset=latin1`, `utf-16`) as broken text, its non-ASCII letters
 * stored as U+FFFD. Each is refused for what it is (415, the route's error shape); a body-less request's
 * Content-Encoding and charset are ignored. `charset=utf-8` (any case, quoted or not) is what JSON is (RFC 8259),
 * and `us-ascii` is a part of it.
 * The charset is checked on the API's routes only: the provider's webhook ingress reads its bytes as it always has.
 */
export const refuseEncodedBodies: onRequestHookHandler = (request, _reply, done) => {
  const coding = request.headers['content-encoding'];
  const hasBody = request.headers['transfer-encoding'] !== undefined || (request.headers['content-length'] ?? '0') !== '0';
  if (!hasBody) return done();
  if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
    return done(new ApiError(415, `Content-Encoding '${coding.slice(0, 100)}' is not supported: send the body uncompressed`));
  }
  // a GET's or a HEAD's body is never read (fastify parses none), so its charset is not judged (regression review 18)
  const charset = request.url.startsWith('/api/') && !UNREAD_BODIES.has(request.method) ? charsetOf(request.headers['content-type']) : undefined;
  if (charset !== undefined && !UTF8.has(charset.toLowerCase())) {
    return done(new ApiError(415, `charset '${charset.slice(0, 100)}' is not supported: send the body as UTF-8`));
  }
  done();
};

const UTF8 = new Set(['utf-8', 'utf8', 'us-ascii']);
/** Methods whose body fastify does not read (its bodyless methods). */
const UNREAD_BODIES = new Set(['GET', 'HEAD', 'TRACE']);

/** The charset parameter of a Content-Type, unquoted; undefined when there is none. */
function charsetOf(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  for (const parameter of contentType.split(';').slice(1)) {
    const eq = parameter.indexOf('=');
    if (eq < 0 || parameter.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    return parameter.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
  }
  return undefined;
}
