// The provider's Graph HTTP API ("cloud API") behind the provider port.
//   POST {baseUrl}/{apiVersion}/{phone_number_id}/messages, bearer token,
//   body {messaging_product: "whatsapp", to, type: "template", template: {name, language: {code}, components}}
//   (+ biz_opaque_callback_data: the send's clientReference, echoed in the status webhooks)
// Success: {messages: [{id}]}. Errors: {error: {message, type, code, error_subcode, error_data: {details}}}.
// Retryable answers (RETRYABLE_PROVIDER_CODES, HTTP 5xx, a connection never made) are retried a bounded number of
// times with exponential backoff and jitter; the last failure is thrown as a ProviderError. A timeout or a
// connection lost after it was made (`connection_lost`) is reported as retryable but not retried here (the message
// may have been accepted: no double sends); so are a 2xx whose body could not be read to its end (the provider accepted
// the message) and a bare 502/504 from a gateway. Redirects are not followed; a response body is read up to MAX_RESPONSE_BYTES; a Retry-After longer
// than the planned backoff ends the retries (the caller tries later).
import { Agent, buildConnector, fetch as undiciFetch } from 'undici';
import {
  mayHaveReachedProvider,
  type MessagingProvider,
  ProviderError,
  RETRYABLE_PROVIDER_CODES,
  type SendTemplateRequest,
  type SendTemplateResult,
} from '../../ports/provider';
import { LogThrottle } from '../../shared/log-throttle';
import { retryAfterMs } from '../../shared/retry-after';

/** Errors of a connection that was never made (nothing was sent): the request may be tried again at once. */
const NOT_CONNECTED: ReadonlySet<string> = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT',
]);
/** …or a TLS handshake that refused the provider's certificate (CERT_HAS_EXPIRED, DEPTH_ZERO_SELF_SIGNED_CERT, ...) */
const isNotConnected = (code: string): boolean => NOT_CONNECTED.has(code) || code.includes('CERT');

/** Marks an error of the connector: the connection (TCP, then TLS) was never made, so nothing was sent. */
const NEVER_CONNECTED = Symbol('never connected');

/** undici's connector, marking its failures (a TLS handshake the peer cuts is an ECONNRESET, like a lost request's). */
function markingConnector(timeout: number): buildConnector.connector {
  const connect = buildConnector({ timeout });
  return (options, callback) =>
    connect(options, (...args) => {
      if (args[0]) callback(Object.assign(args[0], { [NEVER_CONNECTED]: true }), null);
      else callback(null, args[1]);
    });
}

/** The most of a response body that is read; the provider's answers are well under 10 KB. */
export const MAX_RESPONSE_BYTES = 1024 * 1024;

/** A token a header can carry; anything else would make every request fail (with the token in undici's message). */
const HEADER_SAFE_TOKEN = /^[\x21-\x7e]+$/;

const isTimeout = (err: unknown): boolean => ['TimeoutError', 'AbortError'].includes((err as Error)?.name);

/** the Retry-After of the answers that gave one (ProviderError's details have no field for it) */
const retryAfterOf = new WeakMap<ProviderError, number>();

export interface CloudApiProviderOptions {
  baseUrl: string;
  apiVersion: string;
  accessToken: string;
  /** attempts in total, the first included (default 3) */
  maxAttempts?: number;
  /** first backoff delay, doubled per retry (default 250 ms), capped by maxDelayMs (default 4 s) */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** per-attempt timeout, the connection included (default 10 s) */
  timeoutMs?: number;
  /**
   * time to make the connection, TLS handshake included (default 5 s, at most half of timeoutMs): a connection not
   * made in time sent nothing, so it is a `network_error`, retried, not a `timeout`
   */
  connectTimeoutMs?: number;
  /** injectable for tests */
  sleep?: (ms: number) => Promise<void>;
  fetch?: typeof fetch;
  /** 0..1, injectable for deterministic backoff in tests (default Math.random) */
  random?: () => number;
  /**
   * the operator's log: a network failure's own error (which names the address connected to: an egress proxy's, an
   * internal gateway's) is logged here; the ProviderError's message, which reaches the API's 502 body and the
   * recorded rejection, has a fixed text per kind instead (at most one line per NETWORK_LOG_EVERY_MS per kind)
   */
  logger?: { warn(obj: object, msg?: string): void };
}

/** At most one log line per this many ms for each kind of network failure (the others are counted in the next). */
export const NETWORK_LOG_EVERY_MS = 10_000;

/** The error codes of an error and its causes, outermost first. */
function codesOf(err: unknown): string[] {
  const codes: string[] = [];
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && typeof e === 'object' && depth < 5; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string') codes.push(e.code);
  }
  return codes;
}

/**
 * What a network failure is, as a fixed text with its code (`connection refused (ECONNREFUSED)`): never the error's
 * own text, which names the address it connected to (`connect ECONNREFUSED 10.0.0.5:3128`).
 */
export function networkFailureText(err: unknown): string {
  const code = codesOf(err)[0] ?? '';
  const kind =
    code === 'ECONNREFUSED' ? 'connection refused'
      : code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? 'the name did not resolve'
      : code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' ? 'connection timed out'
      : code === 'EHOSTUNREACH' || code === 'ENETUNREACH' ? 'host unreachable'
      : code === 'EADDRNOTAVAIL' ? 'no local address available'
      : code.includes('CERT') ? 'its TLS certificate was refused'
      : code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') ? 'TLS handshake failed'
      : code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED' ? 'connection closed'
      : 'connection failed';
  return /^[A-Z0-9_]{1,64}$/.test(code) ? `${kind} (${code})` : kind;
}

interface ProviderErrorBody {
  error?: {
    message?: unknown;
    type?: unknown;
    code?: unknown;
    error_subcode?: unknown;
    error_data?: { details?: unknown };
  };
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Maps a provider error answer onto ProviderError (code as text; retryable per ARCHITECTURE section 7). */
export function providerErrorFrom(httpStatus: number, body: unknown): ProviderError {
  const err = (body as ProviderErrorBody | null)?.error;
  if (err && (typeof err.code === 'number' || typeof err.code === 'string')) {
    const code = String(err.code);
    const details = typeof err.error_data?.details === 'string' ? err.error_data.details : undefined;
    const base = typeof err.message === 'string' && err.message !== '' ? err.message : `provider error ${code}`;
    const message = details && !base.includes(details) ? `${base}: ${details}` : base;
    return new ProviderError(code, message, RETRYABLE_PROVIDER_CODES.has(code) || httpStatus >= 500 || httpStatus === 429, {
      type: typeof err.type === 'string' ? err.type : undefined,
      subcode: err.error_subcode === undefined || err.error_subcode === null ? undefined : String(err.error_subcode),
      httpStatus,
    });
  }
  return new ProviderError(`http_${httpStatus}`, `provider answered HTTP ${httpStatus}`, httpStatus >= 500 || httpStatus === 429, {
    httpStatus,
  });
}

export class CloudApiProvider implements MessagingProvider {
  readonly kind = 'cloud-api' as const;
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timeoutMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly fetch: typeof fetch;
  private readonly random: () => number;
  private readonly agent: Agent | undefined;
  private readonly accessToken: string;
  /** one log line per kind of network failure per NETWORK_LOG_EVERY_MS */
  private readonly networkLogged = new LogThrottle(NETWORK_LOG_EVERY_MS);

  constructor(private readonly options: CloudApiProviderOptions) {
    // surrounding whitespace (a token file's line break) is dropped, as fetch drops it from a header value
    this.accessToken = options.accessToken.trim();
    if (!HEADER_SAFE_TOKEN.test(this.accessToken)) {
      throw new Error('the provider access token holds spaces, line breaks or other characters an HTTP header cannot carry');
    }
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 3);
    this.baseDelayMs = options.baseDelayMs ?? 250;
    this.maxDelayMs = options.maxDelayMs ?? 4_000;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.sleep = options.sleep ?? defaultSleep;
    // undici's own fetch with its Agent (the connect timeout): with Node's bundled fetch the connect timeout's error
    // code was lost under jest, and the failure taken for a lost connection
    this.fetch = options.fetch ?? (undiciFetch as unknown as typeof fetch);
    this.random = options.random ?? Math.random;
    const connectTimeoutMs = Math.min(options.connectTimeoutMs ?? 5_000, Math.floor(this.timeoutMs / 2));
    this.agent = options.fetch ? undefined : new Agent({ connect: markingConnector(connectTimeoutMs) });
  }

  async close(): Promise<void> {
    await this.agent?.close();
  }

  /** every attempt answering a retryable error just within its timeout, with the longest backoffs between them */
  get maxCallMs(): number {
    let backoff = 0;
    for (let attempt = 1; attempt < this.maxAttempts; attempt++) backoff += Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
    return this.maxAttempts * this.timeoutMs + backoff;
  }

  /** The request body the provider gets for a send (exported for tests and logs). */
  static bodyOf(request: SendTemplateRequest): object {
    return {
      messaging_product: 'whatsapp',
      to: request.to.replace(/^\+/, ''),
      type: 'template',
      template: { name: request.template, language: { code: request.language }, components: request.components },
      ...(request.clientReference ? { biz_opaque_callback_data: request.clientReference } : {}),
    };
  }

  urlOf(phoneNumberId: string): string {
    const base = this.options.baseUrl.replace(/\/+$/, '');
    return `${base}/${encodeURIComponent(this.options.apiVersion)}/${encodeURIComponent(phoneNumberId)}/messages`;
  }

  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    const body = JSON.stringify(CloudApiProvider.bodyOf(request));
    const url = this.urlOf(request.phoneNumberId);
    let last: ProviderError | undefined;
    for (let attempt = 1; attempt <= this.maxAttempts; attempt++) {
      try {
        return await this.attempt(url, body);
      } catch (err) {
        const pe = err instanceof ProviderError ? err : this.networkFailure('network_error', 'provider call failed', err);
        last = new ProviderError(pe.code, pe.message, pe.retryable, { ...pe.details, attempts: attempt });
        // A timeout or a lost connection may mean the provider accepted the message without us hearing back:
        // retrying could send it twice, so it is reported (retryable: the caller may try later) but not retried here.
        if (!pe.retryable || mayHaveReachedProvider(pe) || attempt === this.maxAttempts) break;
        const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
        // the provider asked for more time than this call plans to wait (maxCallMs stays a bound): the caller tries later
        const asked = retryAfterOf.get(pe) ?? 0;
        if (asked > delay) break;
        await this.sleep(Math.max(asked, Math.round(delay * (0.5 + this.random() / 2))));
      }
    }
    throw last!;
  }

  /**
   * A network failure as a ProviderError: `<what>: <fixed text per kind>` (what the API's 502 body and the recorded
   * rejection quote), the error itself to the operator's log (docs/reliability.md, "What is logged (2026-11-28)").
   */
  private networkFailure(code: string, what: string, err: unknown, details?: ProviderError['details']): ProviderError {
    const text = networkFailureText(err);
    const logger = this.options.logger;
    const due = logger ? this.networkLogged.due(text) : undefined;
    if (logger && due) logger.warn({ err, code, failuresNotLoggedSinceLast: due.notLoggedSinceLast }, `${what}: ${text}`);
    return new ProviderError(code, `${what}: ${text}`, true, details);
  }

  private async attempt(url: string, body: string): Promise<SendTemplateResult> {
    let response: Response;
    try {
      response = await this.fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.accessToken}`,
          'content-type': 'application/json',
          accept: 'application/json',
        },
        body,
        // the Graph API does not redirect: following one would post the message (and the token) somewhere else
        redirect: 'manual',
        signal: AbortSignal.timeout(this.timeoutMs),
        ...(this.agent ? { dispatcher: this.agent } : {}),
      } as RequestInit);
    } catch (err) {
      if (isTimeout(err)) throw new ProviderError('timeout', `provider did not answer within ${this.timeoutMs} ms`, true);
      const cause = (err as { cause?: { code?: string; message?: string; [NEVER_CONNECTED]?: true } })?.cause;
      const detail = cause ?? err;
      if (cause?.[NEVER_CONNECTED] || (cause?.code && isNotConnected(cause.code))) throw this.networkFailure('network_error', 'provider unreachable', detail);
      // the request may have been written before the connection failed: the provider may have the message
      throw this.networkFailure('connection_lost', 'connection to the provider lost', detail);
    }
    let text: string | null;
    try {
      text = await readCapped(response);
    } catch (err) {
      if (!response.ok) text = '';
      // a 2xx whose body did not arrive: the provider accepted the message, its id is lost with the body
      else if (isTimeout(err)) throw new ProviderError('timeout', `provider's answer did not arrive within ${this.timeoutMs} ms`, true, { httpStatus: response.status });
      else throw this.networkFailure('connection_lost', 'connection to the provider lost while reading its answer', err, { httpStatus: response.status });
    }
    let parsed: unknown = null;
    try {
      parsed = text === null || text === '' ? null : JSON.parse(text);
    } catch {
      parsed = null;
    }
    if (!response.ok) {
      const err = gatewayFailure(response.status, parsed) ?? providerErrorFrom(response.status, parsed);
      const header = response.headers.get('retry-after');
      const wait = header === null ? undefined : retryAfterMs(header, new Date());
      if (wait === undefined) throw err;
      const withWait = new ProviderError(err.code, `${err.message} (Retry-After: ${header!.trim()})`, err.retryable, err.details);
      retryAfterOf.set(withWait, wait);
      throw withWait;
    }
    const id = (parsed as { messages?: Array<{ id?: unknown }> } | null)?.messages?.[0]?.id;
    if (typeof id !== 'string' || id === '') {
      // The provider accepted (2xx) but we cannot tell the id: retrying could send twice, so do not.
      const why = text === null ? `an answer over ${MAX_RESPONSE_BYTES} bytes` : 'an answer without a message id';
      throw new ProviderError('invalid_response', `provider answered HTTP ${response.status} with ${why}`, false, { httpStatus: response.status });
    }
    return { providerMessageId: id };
  }
}

/**
 * A 502 or 504 without the provider's error body comes from a gateway in front of it that lost or timed out its
 * upstream request, which may have reached the provider: not a definite failure, so it is not retried.
 */
function gatewayFailure(httpStatus: number, body: unknown): ProviderError | undefined {
  if ((httpStatus !== 502 && httpStatus !== 504) || isGraphError(body)) return undefined;
  return httpStatus === 504
    ? new ProviderError('timeout', 'provider answered HTTP 504 (gateway timeout): it may have the message', true, { httpStatus })
    : new ProviderError('connection_lost', 'provider answered HTTP 502 (bad gateway): it may have the message', true, { httpStatus });
}

/** Whether a body is the Graph API's error: an `error` object with a numeric code (a gateway's `{"error": "..."}` is not). */
function isGraphError(body: unknown): boolean {
  const err = (body as { error?: unknown } | null)?.error as { code?: unknown } | undefined;
  if (typeof err !== 'object' || err === null) return false;
  return typeof err.code === 'number' || (typeof err.code === 'string' && /^\d+$/.test(err.code));
}

/** The response body as text, or null (and the rest left unread) when it is over MAX_RESPONSE_BYTES. */
async function readCapped(response: Response): Promise<string | null> {
  if (Number(response.headers.get('content-length') ?? 0) > MAX_RESPONSE_BYTES) {
    await response.body?.cancel().catch(() => undefined);
    return null;
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks).toString('utf8');
    size += value.byteLength;
    if (size > MAX_RESPONSE_BYTES) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
}
