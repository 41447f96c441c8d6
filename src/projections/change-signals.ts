// Change signals of the `business`, `accounts` and `contacts` read models, for the per-process read caches of the
// HTTP endpoints (src/http/read-cache.ts, src/http/contact-cache.ts). A projection that changes what cached reads show
//  1. marks the company as changing in this process (`markChanging`) before its transaction commits, so that no
//     read of this process caches what it loads meanwhile, and
//  2. notifies `<channel>` with the company id in the same transaction (`pg_notify` in the changing statement:
//     no extra round trip); every process LISTENs and drops its entries when the notification arrives (after
//     the commit). A mark simply expires: it only keeps this process from caching for a moment.

export const BUSINESS_CHANGED_CHANNEL = 'rm_business_changed';
export const ACCOUNTS_CHANGED_CHANNEL = 'rm_accounts_changed';
/**
 * The contacts read model: payload `<companyId>:<phone>` when the contacts holding that number (as stored), their
 * custom-field values or the number's replies changed; `claim:<companyId>:<phone>` when the number's claims
 * changed; `<companyId>` when the company's lists or custom-field definitions changed (every number of the
 * company); `*` for everything.
 */
export const CONTACTS_CHANGED_CHANNEL = 'rm_contacts_changed';

/**
 * The webhooks read model: payload `<endpointId>` when an endpoint's URL or event types changed, or it was disabled
 * or deleted; every webhook sender LISTENs and gives back what it holds for that endpoint and has not posted yet
 * (src/workers/webhook-sender.ts), so nothing more is posted to the old URL or to an endpoint turned off.
 */
export const WEBHOOK_ENDPOINTS_CHANGED_CHANNEL = 'rm_webhook_endpoints_changed';

/**
 * How long a mark holds: longer than a projection batch transaction takes, so a load that may have read the
 * state before the commit is never cached; the notification then drops what was cached before.
 */
const CHANGING_MS = 2_000;
const changing = new Map<string, number>();
const keyOf = (channel: string, companyId: number | string) => `${channel}|${companyId}`;

/** expired marks are swept when there are this many (keyed by number they may be many: most are never read) */
const SWEEP_AT = 10_000;
let lastSweep = 0;

/** `companyId` may also be a finer key of the channel (contacts: `<companyId>:<phone>`). */
export function markChanging(channel: string, companyId: number | string): void {
  const now = Date.now();
  if (changing.size >= SWEEP_AT && now - lastSweep >= CHANGING_MS / 4) {
    lastSweep = now;
    for (const [key, until] of changing) if (until < now) changing.delete(key);
  }
  changing.set(keyOf(channel, companyId), now + CHANGING_MS);
}

export function isChanging(channel: string, companyId: number | string): boolean {
  if (changing.size === 0) return false;
  const key = keyOf(channel, companyId);
  const until = changing.get(key);
  if (until === undefined) return false;
  if (until < Date.now()) {
    changing.delete(key);
    return false;
  }
  return true;
}
