import { Agent, type buildConnector, type Dispatcher, Pool, ProxyAgent } from 'undici';
import { LogThrottle } from '../../shared/log-throttle';
import { ForbiddenAddressError, guardLookup, guardedLookup, literalHostRefusal, type Resolver, resolvingLookup } from './address-guard';

export interface WebhookPost {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** Why no response arrived: the whole request timed out, the connection failed, or the address was refused (SSRF guard). */
export type WebhookFailure = 'timeout' | 'connection_error' | 'address_refused';

export interface WebhookResponse {
  /** null when no response arrived (then `failure` says why) */
  statusCode: number | null;
  failure: WebhookFailure | null;
  latencyMs: number;
  error: string | null;
  /** at most maxBodyBytes of the response body */
  body: string;
  /** a failed answer's `Retry-After` header, as sent (Standard Webhooks: the next attempt takes it into account) */
  retryAfter: string | null;
}

/** Whether the endpoint took the event: a 2xx answer. */
export const answeredOk = (res: WebhookResponse): boolean => res.statusCode !== null && res.statusCode >= 200 && res.statusCode < 300;

export interface WebhookHttpClientOptions {
  timeoutMs: number;
  maxBodyBytes: number;
  allowPrivate: boolean;
  /** name resolution (default: the system's); tests stand in for a DNS answer that changed after registration */
  resolve?: Resolver;
  /**
   * the certificate authorities an endpoint's TLS certificate must chain to, instead of the system's (tests; an
   * operator adds a private CA with NODE_EXTRA_CA_CERTS instead)
   */
  ca?: string;
  /** an egress proxy (HTTP CONNECT) every request goes through: it resolves the names, so it must refuse private addresses */
  proxyUrl?: string;
  /**
   * the operator's log: a failure to reach the egress proxy is logged here with its error (the proxy's address),
   * which the attempt's `error` (shown to the client) leaves out; at most one line per PROXY_LOG_EVERY_MS
   */
  logger?: { warn(obj: object, msg?: string): void };
}

/** Marks an error of the connection to the egress proxy (not to the endpoint): its text names the proxy's address. */
const PROXY_FAILURE = Symbol('egress proxy failure');
/** At most one log line per this many ms about the egress proxy failing (the others are counted in the next). */
export const PROXY_LOG_EVERY_MS = 10_000;

/** The connector of the proxy's own connections, marking its failures (refused, unresolved, TLS to the proxy...). */
function markingProxyConnector(connect: buildConnector.connector): buildConnector.connector {
  return (options, callback) =>
    connect(options, (...args) => {
      if (args[0]) callback(Object.assign(args[0], { [PROXY_FAILURE]: true }), null);
      else callback(null, args[1]);
    });
}

const isProxyFailure = (err: unknown): boolean => {
  for (let e = err as { cause?: unknown; [PROXY_FAILURE]?: true } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e === 'object' && e[PROXY_FAILURE]) return true;
  }
  return false;
};

/**
 * What the client is told of an egress proxy that could not be reached: a fixed text per kind of failure, never the
 * error's own text (`connect ECONNREFUSED 10.0.0.5:3128`: the proxy's internal address).
 */
export function proxyFailureText(err: unknown): string {
  const codes: string[] = [];
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && typeof e === 'object' && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string') codes.push(e.code);
  }
  const code = codes.find((c) => c !== 'UND_ERR_PRX_TLS') ?? codes[0] ?? '';
  const kind =
    code === 'ECONNREFUSED' ? 'connection refused'
      : code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? 'its name did not resolve'
      : code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' ? 'connection timed out'
      : code === 'EHOSTUNREACH' || code === 'ENETUNREACH' ? 'host unreachable'
      : code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' ? 'connection closed'
      : code === 'UND_ERR_PRX_TLS' || code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || code.includes('CERT') ? 'TLS handshake failed'
      : 'connection failed';
  return `egress proxy failed (${kind}): the request did not reach the endpoint`;
}

/**
 * Posts signed webhook bodies with undici (about a third of the CPU of node:http per request; docs/webhooks.md):
 * keep-alive, a whole-request timeout, a capped response body, the SSRF guard. No redirects are followed.
 */
export class WebhookHttpClient {
  private readonly agent: Dispatcher;
  private readonly proxyLogged = new LogThrottle(PROXY_LOG_EVERY_MS);

  constructor(private readonly options: WebhookHttpClientOptions) {
    const ca = options.ca ? { ca: options.ca } : {};
    if (options.proxyUrl) {
      // tunnelled (CONNECT) through the operator's proxy; the literal addresses are still refused here (post)
      const tls = { timeout: options.timeoutMs, ...ca };
      this.agent = new ProxyAgent({
        uri: options.proxyUrl, connections: null, proxyTls: tls, requestTls: tls,
        // the proxy's own connections: their failures are the proxy's, told apart from the endpoint's (post)
        clientFactory: (origin, opts) => {
          const { connect } = opts as { connect: buildConnector.connector };
          return new Pool(origin, { ...opts, connect: markingProxyConnector(connect) });
        },
      });
      return;
    }
    // every new connection resolves through the guard, so a name re-pointed at a private address is caught there
    const lookup = options.allowPrivate ? options.resolve && resolvingLookup(options.resolve) : options.resolve ? guardLookup(options.resolve) : guardedLookup;
    // no cap per origin: the sender's lanes cap the requests to each endpoint, and endpoints may share an origin
    this.agent = new Agent({ connections: null, connect: { timeout: options.timeoutMs, ...ca, ...(lookup ? { lookup: lookup as never } : {}) } });
  }

  post(request: WebhookPost): Promise<WebhookResponse> {
    const started = process.hrtime.bigint();
    const elapsed = () => Number((process.hrtime.bigint() - started) / 1_000_000n);
    const url = new URL(request.url);
    const refusal = this.options.allowPrivate ? null : literalHostRefusal(url);
    if (refusal) return Promise.resolve({ statusCode: null, failure: 'address_refused', error: refusal, body: '', retryAfter: null, latencyMs: elapsed() });
    const max = this.options.maxBodyBytes;
    return new Promise((resolve) => {
      let settled = false;
      let abort: ((reason?: Error) => void) | undefined;
      let statusCode = 0;
      let retryAfter: string | null = null;
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = (r: Omit<WebhookResponse, 'latencyMs'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ ...r, latencyMs: elapsed() });
      };
      const answered = () => finish({ statusCode, failure: null, error: null, body: Buffer.concat(chunks).toString('utf8'), retryAfter });
      const timer = setTimeout(() => {
        const error = `timed out after ${this.options.timeoutMs} ms`;
        finish({ statusCode: null, failure: 'timeout', error, body: '', retryAfter: null });
        abort?.(new Error(error));
      }, this.options.timeoutMs);
      // undici's handler API: no response stream or AbortController per request (the sender posts thousands a second)
      this.agent.dispatch(
        {
          origin: url.origin,
          path: url.pathname + url.search,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': 'Switchboard-Webhooks/1', ...request.headers },
          body: request.body,
        },
        {
          onConnect: (abortRequest) => {
            abort = abortRequest;
            if (settled) abortRequest(); // timed out while connecting
          },
          onHeaders: (code, rawHeaders) => {
            statusCode = code;
            if (code >= 300) retryAfter = headerOf(rawHeaders, 'retry-after'); // a 2xx's headers are never read
            return true;
          },
          onData: (chunk) => {
            chunks.push(chunk.subarray(0, max - size));
            size = Math.min(max, size + chunk.length);
            if (size < max) return true;
            // the rest is never read: the answer is known, the connection is dropped instead of drained
            answered();
            abort?.();
            return false;
          },
          onComplete: answered,
          onError: (err) => finish({
            statusCode: null,
            failure: err instanceof ForbiddenAddressError ? 'address_refused' : 'connection_error',
            error: this.errorText(err),
            body: '',
            retryAfter: null,
          }),
        },
      );
    });
  }

  /**
   * An attempt's `error` (the deliveries page shows it to the client): the error's text, which names the endpoint's
   * host (the client's), but a fixed text when the egress proxy could not be reached or refused the tunnel; the
   * proxy's error, with its address, goes to the operator's log (docs/reliability.md, "What is logged").
   */
  private errorText(err: Error): string {
    if (this.options.proxyUrl) {
      const tunnel = /^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling$/.exec(err.message ?? '');
      if (tunnel) return `the egress proxy answered HTTP ${tunnel[1]} to the tunnel request: the request did not reach the endpoint`;
      if (isProxyFailure(err)) {
        this.logProxyFailure(err);
        return proxyFailureText(err);
      }
    }
    return err.message || String(err);
  }

  private logProxyFailure(err: Error): void {
    const logger = this.options.logger;
    const due = logger ? this.proxyLogged.due() : undefined;
    if (logger && due) logger.warn({ err, failuresNotLoggedSinceLast: due.notLoggedSinceLast }, 'webhook egress proxy (WEBHOOKS_PROXY_URL) could not be reached');
  }

  close(): void {
    void this.agent.destroy().catch(() => undefined);
  }
}

/** A header's first value from undici's raw headers (name, value, name, value, ...). */
function headerOf(raw: Buffer[] | string[] | null, name: string): string | null {
  if (!raw) return null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i].toString('latin1').toLowerCase() === name) return raw[i + 1].toString('latin1');
  }
  return null;
}
