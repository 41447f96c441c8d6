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
 * (the same section): Node keeps the first and drops the others, and a proxy in front may have read another. So is a
 * Host that is no `host[:port]` (the same section: "a Host header field with an invalid field value"; review 22):
 * `Host: a b`, `a"><x>`, `a@b`, `a/b?c` were taken, and the bulk lists' `next`/`previous` links were built from them.
 * Counted in `rawHeaders`: a request in absolute form has its target's authority as its host (`originFormOf`).
 */
export const requireHostHeader: onRequestHookHandler = (request, _reply, done) => {
  const hosts = hostHeadersIn(request.raw.rawHeaders);
  if (hosts > 1) return done(new ApiError(400, 'the Host header must be sent once'));
  const host = request.raw.headers.host;
  if (host !== undefined && !HOST.test(host)) return done(new ApiError(400, 'the Host header is not a valid host[:port]'));
  if (hosts === 1 || request.raw.httpVersion !== '1.1') return done();
  done(new ApiError(400, 'the Host header is required'));
};

/**
 * `uri-host [ ":" port ]` (RFC 9112, section 3.2; RFC 3986, section 3.2.2): an IP literal in brackets (an IPv6 address,
 * with a zone `%25...` or not, or `v<hex>.<...>`), or a reg-name (IPv4 included) of unreserved characters,
 * percent-escapes (`%` and two hex digits) and sub-delims; empty is allowed (section 3.2 asks for an empty Host when
 * the target has no authority), but not a port after no host (RFC 9110, section 4.2.1: an http authority with an
 * empty host is invalid). Until regression review 23a any `%`, anything in brackets and `:8080` passed, and the page
 * links built from them were no URLs (`http://a%zz/...`, `http://[zzz]/...`, `http://:8080/...`).
 */
const PCT = '%[0-9A-Fa-f]{2}';
const IPV6 = `[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(?:%25(?:[0-9A-Za-z._~-]|${PCT})+)?`;
const IPV_FUTURE = "[vV][0-9A-Fa-f]+\\.[0-9A-Za-z._~!$&'()*+,;=:-]+";
const REG_NAME = `(?:[0-9A-Za-z._~!$&'()*+,;=-]|${PCT})`;
const HOST = new RegExp(`^(?:(?:\\[(?:${IPV6}|${IPV_FUTURE})\\]|${REG_NAME}+)(?::[0-9]*)?)?$`);

/**
 * A request target in absolute form (`GET http://host/path HTTP/1.1`), which a server must accept (RFC 9112, section
 * 3.2.2): read as its origin form (`/path`), with the target's authority as the request's host, the received Host
 * being ignored (the same section). The router already found such a route, but everything reading the URL did not:
 * a bulk list's `next` link was `http://xhttp://y/...`, a known path asked with another method was 404, not 405, and
 * the charset check did not see an `/api/` path (review 22). Other schemes are left as sent (404). Fastify's `rewriteUrl`.
 */
export function originFormOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  if (url.charCodeAt(0) === 47) return url; // '/': origin form, nearly every request
  const absolute = ABSOLUTE_FORM.exec(url);
  if (!absolute) return url;
  req.headers.host = absolute[1];
  const rest = url.slice(absolute[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)/i;

/** How many Host headers `rawHeaders` (name, value, name, value, ...) holds: cheaper than `headersDistinct`, which copies every header. */
function hostHeadersIn(rawHeaders: readonly string[]): number {
  let hosts = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].length === 4 && rawHeaders[i].toLowerCase() === 'host') hosts++;
  return hosts;
}

/**
 * Bodies are parsed as sent, as UTF-8 JSON: a compressed one (Content-Encoding gzip, br, ...) would be read as broken
 * JSON, and one declared in another charset (`charset=latin1`, `utf-16`) as broken text, its non-ASCII letters
 * stored as U+FFFD. Each is refused for what it is (415, the route's error shape), as is a transfer coding other
 * than `chunked` (review 22); a body-less request's Content-Encoding and charset are ignored. `charset=utf-8` (any case, quoted or not) is what JSON is (RFC 8259),
 * and `us-ascii` is a part of it.
 * The charset is checked on the API's routes only: the provider's webhook ingress reads its bytes as it always has.
 */
export const refuseEncodedBodies: onRequestHookHandler = (request, _reply, done) => {
  const coding = request.headers['content-encoding'];
  const transfer = request.headers['transfer-encoding'];
  const hasBody = transfer !== undefined || (request.headers['content-length'] ?? '0') !== '0';
  if (!hasBody) return done();
  // Node decodes `chunked` only: `Transfer-Encoding: gzip, chunked` handed the compressed bytes to the JSON parser
  if (transfer !== undefined && transfer.trim().toLowerCase() !== 'chunked') {
    return done(new ApiError(415, `Transfer-Encoding '${transfer.slice(0, 100)}' is not supported: send the body chunked or with a Content-Length, uncompressed`));
  }
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
