// The sandbox provider: the provider port without network (the embedded default and tests).
// - accepts every send and answers a `wamid.`-style id;
// - a recipient whose number ends in 0000 is refused with 131026 (message undeliverable);
// - delivery 'auto': shortly after an accepted send it emits a `delivered` and then a `read` notification
//   in the provider's webhook format, split and published to `provider.webhooks` exactly as the webhook
//   ingress does, so they take the same path as the real provider's notifications; 'off': emits nothing
//   (tests drive statuses themselves);
// - optional latency per send, to mimic the provider's response time.
import { randomBytes } from 'node:crypto';
import {
  type MessagingProvider,
  ProviderError,
  type SendTemplateRequest,
  type SendTemplateResult,
} from '../../ports/provider';
import type { RecordTransport } from '../../ports/transport';
import { PROVIDER_WEBHOOK_TOPIC, type ProviderStatusName, splitWebhook, statusWebhook } from '../../shared/provider-webhook';

export interface SandboxProviderOptions {
  delivery: 'auto' | 'off';
  /** needed for delivery 'auto' */
  transport?: RecordTransport;
  /** delay of the `delivered` notification after the send (default 100 ms) */
  deliveredAfterMs?: number;
  /** delay of the `read` notification after the send (default 300 ms) */
  readAfterMs?: number;
  /** simulated provider response time per send (default 0) */
  latencyMs?: number;
  /** for failures to publish notifications */
  logger?: { warn(obj: object, msg?: string): void };
  now?: () => Date;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const ID_RANDOM_BYTES = 18;
let entropy = Buffer.alloc(0);
let entropyUsed = 0;

/** 18 random bytes for a message id, cut from a pool filled for 256 ids at a time (one system call, not one per send). */
function idEntropy(): Buffer {
  if (entropyUsed + ID_RANDOM_BYTES > entropy.length) {
    entropy = randomBytes(ID_RANDOM_BYTES * 256);
    entropyUsed = 0;
  }
  entropyUsed += ID_RANDOM_BYTES;
  return entropy.subarray(entropyUsed - ID_RANDOM_BYTES, entropyUsed);
}

export class SandboxProvider implements MessagingProvider {
  readonly kind = 'sandbox' as const;
  /** sends accepted or refused so far (tests, benches) */
  sendCount = 0;
  acceptedCount = 0;
  /** the most recent requests, newest last (at most 1000) */
  readonly requests: SendTemplateRequest[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(private readonly options: SandboxProviderOptions) {
    if (options.delivery === 'auto' && !options.transport) throw new Error('the sandbox provider needs a transport for delivery=auto');
  }

  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    this.sendCount++;
    this.requests.push(request);
    if (this.requests.length > 1000) this.requests.splice(0, this.requests.length - 1000);
    if (this.options.latencyMs) await sleep(this.options.latencyMs);
    const digits = request.to.replace(/\D/g, '');
    if (digits.endsWith('0000')) {
      throw new ProviderError('131026', 'Message undeliverable', false, { type: 'OAuthException', httpStatus: 400 });
    }
    this.acceptedCount++;
    const providerMessageId = `wamid.${Buffer.concat([Buffer.from(digits.slice(-12)), idEntropy()]).toString('base64url')}`;
    if (this.options.delivery === 'auto' && !this.closed) {
      this.later(this.options.deliveredAfterMs ?? 100, request, providerMessageId, 'delivered');
      this.later(this.options.readAfterMs ?? 300, request, providerMessageId, 'read');
    }
    return { providerMessageId };
  }

  private later(ms: number, request: SendTemplateRequest, providerMessageId: string, status: ProviderStatusName): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      const p = this.emit(request, providerMessageId, status).finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    }, ms);
    timer.unref?.();
    this.timers.add(timer);
  }

  private async emit(request: SendTemplateRequest, providerMessageId: string, status: ProviderStatusName): Promise<void> {
    if (this.closed) return;
    const now = (this.options.now ?? (() => new Date()))();
    const body = statusWebhook([
      {
        phoneNumberId: request.phoneNumberId,
        providerMessageId,
        status,
        timestamp: String(Math.floor(now.getTime() / 1000)),
        recipientId: request.to.replace(/\D/g, ''),
        clientReference: request.clientReference,
      },
    ]);
    const records = splitWebhook(body, now.toISOString()) ?? [];
    try {
      await this.options.transport!.publish(PROVIDER_WEBHOOK_TOPIC, records);
    } catch (err) {
      this.options.logger?.warn({ err, providerMessageId, status }, 'sandbox: publishing a notification failed');
    }
  }

  /** Cancels pending notifications and waits for those being published. */
  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
  }
}
