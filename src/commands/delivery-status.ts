// A provider's status for one message, as the delivery consumer (src/workers/delivery-consumer.ts) parsed it from
// a webhook, and the applier each kind of message owner provides (single sends, bulk recipients).
import type { Services } from '../services';
import type { ProviderMessageOwner } from '../projections/sends/queries';
import type { ProviderStatus } from './send/decider';

export interface ProviderStatusUpdate {
  providerMessageId: string;
  status: ProviderStatus;
  /** ISO 8601, the provider's timestamp */
  at: string;
  /** unix seconds as sent (part of the deterministic event id) */
  timestamp: string;
  errorCode: string | null;
  errorMessage: string | null;
  /** the status's `biz_opaque_callback_data` (a keyed send's id, see src/commands/send/reconcile.ts) */
  clientReference?: string;
  /** the number the webhook was for */
  phoneNumberId?: string;
}

export type StatusApplier = (services: Services, owner: ProviderMessageOwner, update: ProviderStatusUpdate) => Promise<void>;
