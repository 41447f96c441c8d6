import { Agent, type Dispatcher, ProxyAgent } from 'undici';
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
}

/**
 * Posts signed webhook bodies with undici (about a third of the CPU of node:http per request; docs/webhooks.md):
 * keep-alive, a whole-request timeout, a capped response body, the SSRF guard. No redirects are followed.
 */
export class WebhookHttpClient {
  private readonly agent: Dispatcher;

  constructor(private readonly options: WebhookHttpClientOptions) {
    const ca = options.ca ? { ca: options.ca } : {};
    if (options.proxyUrl) {
      // tunnelled (CONNECT) through the operator's proxy; the literal addresses are still refused here (post)
      const tls = { timeout: options.timeoutMs, ...ca };
      this.agent = new ProxyAgent({ uri: options.proxyUrl, connections: null, proxyTls: tls, requestTls: tls });
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
            error: err.message || String(err),
            body: '',
            retryAfter: null,
          }),
        },
      );
    });
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
