// The provider's Graph HTTP API ("cloud API") behind the provider port.
//   POST {baseUrl}/{apiVersion}/{phone_number_id}/messages, bearer token,
//   body {messaging_product: "whatsapp", to, type: "template", template: {name, language: {code}, components}}
//   (+ biz_opaque_callback_data: the send's clientReference, echoed in the status webhooks)
// Success: {messages: [{id}]}. Errors: {error: {message, type, code, error_subcode, error_data: {details}}}.
// Retryable answers (RETRYABLE_PROVIDER_CODES, HTTP 5xx, a connection never made) are retried a bounded number of
// times with exponential backoff and jitter; the last failure is thrown as a ProviderError. A timeout or a
// connection lost after it was made (`connection_lost`) is reported as retryable but not retried here (the message
// may have been accepted: no double sends).
import {
  mayHaveReachedProvider,
  type MessagingProvider,
  ProviderError,
  RETRYABLE_PROVIDER_CODES,
  type SendTemplateRequest,
  type SendTemplateResult,
} from '../../ports/provider';

/** Errors of a connection that was never made (nothing was sent): the request may be tried again at once. */
const NOT_CONNECTED: ReadonlySet<string> = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT',
]);
/** …or a TLS handshake that refused the provider's certificate (CERT_HAS_EXPIRED, DEPTH_ZERO_SELF_SIGNED_CERT, ...) */
const isNotConnected = (code: string): boolean => NOT_CONNECTED.has(code) || code.includes('CERT');

export interface CloudApiProviderOptions {
  baseUrl: string;
  apiVersion: string;
  accessToken: string;
  /** attempts in total, the first included (default 3) */
  maxAttempts?: number;
  /** first backoff delay, doubled per retry (default 250 ms), capped by maxDelayMs (default 4 s) */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** per-attempt timeout (default 10 s) */
  timeoutMs?: number;
  /** injectable for tests */
  sleep?: (ms: number) => Promise<void>;
  fetch?: typeof fetch;
  /** 0..1, injectable for deterministic backoff in tests (default Math.random) */
  random?: () => number;
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
    return new ProviderError(code, message, RETRYABLE_PROVIDER_CODES.has(code) || httpStatus >= 500, {
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

  constructor(private readonly options: CloudApiProviderOptions) {
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 3);
    this.baseDelayMs = options.baseDelayMs ?? 250;
    this.maxDelayMs = options.maxDelayMs ?? 4_000;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.sleep = options.sleep ?? defaultSleep;
    this.fetch = options.fetch ?? fetch;
    this.random = options.random ?? Math.random;
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
        const pe = err instanceof ProviderError ? err : new ProviderError('network_error', (err as Error).message, true);
        last = new ProviderError(pe.code, pe.message, pe.retryable, { ...pe.details, attempts: attempt });
        // A timeout or a lost connection may mean the provider accepted the message without us hearing back:
        // retrying could send it twice, so it is reported (retryable: the caller may try later) but not retried here.
        if (!pe.retryable || mayHaveReachedProvider(pe) || attempt === this.maxAttempts) break;
        const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
        await this.sleep(Math.round(delay * (0.5 + this.random() / 2)));
      }
    }
    throw last!;
  }

  private async attempt(url: string, body: string): Promise<SendTemplateResult> {
    let response: Response;
    try {
      response = await this.fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.options.accessToken}`,
          'content-type': 'application/json',
          accept: 'application/json',
        },
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const name = (err as Error)?.name;
      if (name === 'TimeoutError' || name === 'AbortError') {
        throw new ProviderError('timeout', `provider did not answer within ${this.timeoutMs} ms`, true);
      }
      const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
      const reason = cause?.message ?? (err as Error)?.message ?? String(err);
      if (cause?.code && isNotConnected(cause.code)) throw new ProviderError('network_error', `provider unreachable: ${reason}`, true);
      // the request may have been written before the connection failed: the provider may have the message
      throw new ProviderError('connection_lost', `connection to the provider lost: ${reason}`, true);
    }
    const text = await response.text().catch(() => '');
    let parsed: unknown = null;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      parsed = null;
    }
    if (!response.ok) throw providerErrorFrom(response.status, parsed);
    const id = (parsed as { messages?: Array<{ id?: unknown }> } | null)?.messages?.[0]?.id;
    if (typeof id !== 'string' || id === '') {
      // The provider accepted (2xx) but we cannot tell the id: retrying could send twice, so do not.
      throw new ProviderError('invalid_response', 'provider answered without a message id', false, { httpStatus: response.status });
    }
    return { providerMessageId: id };
  }
}
