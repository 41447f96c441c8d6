// The messaging provider port (ARCHITECTURE section 7). Adapters: src/adapters/provider/cloud-api.ts (the
// provider's Graph HTTP API) and src/adapters/provider/sandbox.ts (no network). Only src/main.ts and tests
// pick one.

/** A parameter of a template component, in the provider's wire format. */
export type TemplateParameter =
  | { type: 'text'; text: string }
  | { type: 'currency'; currency: { fallback_value: string; code: string; amount_1000: number } }
  | { type: 'date_time'; date_time: { fallback_value: string } }
  | { type: 'image'; image: { link: string } }
  | { type: 'video'; video: { link: string } }
  | { type: 'document'; document: { link: string } }
  | { type: 'payload'; payload: string };

/** A template component, in the provider's wire format. */
export type TemplateComponent =
  | { type: 'header'; parameters: TemplateParameter[] }
  | { type: 'body'; parameters: TemplateParameter[] }
  | { type: 'button'; sub_type: 'url' | 'quick_reply'; index: string; parameters: TemplateParameter[] };

export interface SendTemplateRequest {
  /** the provider's id of the sending number */
  phoneNumberId: string;
  /** recipient, E.164 (with or without `+`; adapters send what the provider expects) */
  to: string;
  /** template name */
  template: string;
  /** language code, e.g. `es`, `pt_BR` */
  language: string;
  components: TemplateComponent[];
  /**
   * Our reference of the send (the send id), carried to the provider and echoed back in its status notifications
   * (the Cloud API's `biz_opaque_callback_data`): a status for a message whose answer was never recorded names
   * its send (docs/sends.md, "Idempotent sends").
   */
  clientReference?: string;
}

export interface SendTemplateResult {
  /** the provider's message id (`wamid.…`) */
  providerMessageId: string;
}

/**
 * A refusal or failure of the provider. `code` is the provider's error code as text (`131026`), or a
 * transport-level code (`http_503`, `network_error` (no connection: nothing was sent), `connection_lost`,
 * `timeout`, `invalid_response`). `retryable` tells
 * whether trying again later may succeed (throughput, temporary outage) or never will (recipient or
 * template problem).
 */
export class ProviderError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly retryable: boolean,
    readonly details?: { type?: string; subcode?: string; httpStatus?: number; attempts?: number },
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

/**
 * Whether a failed call may still have reached the provider, which may then have accepted the message: it timed
 * out, the connection was lost once the request could have been written (`connection_lost`), the provider accepted
 * it (2xx) with an answer that names no message id (`invalid_response`), or it failed in a way the adapter did not
 * classify. Trying again could then message the customer twice.
 */
export function mayHaveReachedProvider(err: unknown): boolean {
  return !isProviderError(err) || MAY_HAVE_REACHED.has(err.code);
}

/** The codes of a ProviderError that may have reached the provider (mayHaveReachedProvider). */
export const MAY_HAVE_REACHED_CODES = ['timeout', 'connection_lost', 'invalid_response'] as const;
const MAY_HAVE_REACHED: ReadonlySet<string> = new Set(MAY_HAVE_REACHED_CODES);

export interface MessagingProvider {
  readonly kind: 'sandbox' | 'cloud-api' | 'test';
  /** Sends one template message; resolves with the provider's id or throws ProviderError. */
  sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult>;
  /**
   * The longest one `sendTemplate` call can take, its retries and backoff included, where the adapter bounds it
   * (a keyed send's request counts as in flight at least this long, src/commands/send/keyed.ts).
   */
  readonly maxCallMs?: number;
  /** Releases timers and connections (the sandbox's pending notifications). */
  close?(): Promise<void>;
}

/**
 * Provider codes that may succeed when retried (ARCHITECTURE section 7): 130429 throughput, 131056 pair
 * rate (that recipient only), 4 app rate limit, 80007 account rate limit, 131000 generic/temporary. HTTP 5xx,
 * network errors and timeouts are retryable too.
 */
export const RETRYABLE_PROVIDER_CODES: ReadonlySet<string> = new Set(['130429', '131056', '4', '80007', '131000']);

export const isProviderError = (err: unknown): err is ProviderError =>
  err instanceof ProviderError || (err instanceof Error && err.name === 'ProviderError' && 'retryable' in err);
