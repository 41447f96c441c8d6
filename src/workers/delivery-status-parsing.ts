// Reading a provider webhook record: a status record parsed and validated into the update the consumer applies
// (malformed → PoisonRecordError), and the helpers the inbound-message path shares (object check, unix seconds).
import type { ProviderStatus } from '../commands/send/decider';
import { PoisonRecordError } from '../ports/transport';
import type { ProviderStatusUpdate } from '../commands/delivery-status';
import { hasUnstorableText, isStorableInstant, MAX_JSON_DEPTH, nestsDeeperThan } from '../shared/storable';

export const isObject = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** JSON.stringify (an append, a parked-status insert) would overflow the stack on such a value, on every retry. */
export const tooDeepReason = (value: unknown): string | null =>
  nestsDeeperThan(value, MAX_JSON_DEPTH) ? `record value nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels` : null;

const STATUSES = new Set<ProviderStatus>(['sent', 'delivered', 'read', 'failed']);

export function unixToIso(ts: unknown, what: string): { iso: string; raw: string } {
  const raw = typeof ts === 'number' ? String(ts) : typeof ts === 'string' ? ts.trim() : '';
  if (!/^\d{1,12}$/.test(raw)) throw new PoisonRecordError(`${what}: timestamp must be unix seconds, got ${JSON.stringify(ts)}`);
  const at = new Date(Number(raw) * 1000);
  if (!isStorableInstant(at)) throw new PoisonRecordError(`${what}: timestamp ${raw} lies after year 9999`);
  return { iso: at.toISOString(), raw };
}

/** Parses a status record; throws PoisonRecordError when it is malformed; null for statuses we do not track. */
export function parseStatusRecord(value: Record<string, any>): ProviderStatusUpdate | null {
  const s = value.status;
  if (!isObject(s)) throw new PoisonRecordError('status record without a status object');
  if (typeof s.id !== 'string' || s.id === '') throw new PoisonRecordError('status without a provider message id');
  if (typeof s.status !== 'string') throw new PoisonRecordError(`status of ${s.id} has no status name`);
  if (!STATUSES.has(s.status as ProviderStatus)) return null;
  const { iso, raw } = unixToIso(s.timestamp, `status ${s.status} of ${s.id}`);
  let errorCode: string | null = null;
  let errorMessage: string | null = null;
  if (s.status === 'failed') {
    const e = Array.isArray(s.errors) && isObject(s.errors[0]) ? s.errors[0] : {};
    errorCode = e.code === undefined || e.code === null ? null : String(e.code);
    const details = isObject(e.error_data) && typeof e.error_data.details === 'string' ? e.error_data.details : null;
    errorMessage = details ?? (typeof e.message === 'string' ? e.message : null) ?? (typeof e.title === 'string' ? e.title : null);
  }
  const update: ProviderStatusUpdate = { providerMessageId: s.id, status: s.status as ProviderStatus, at: iso, timestamp: raw, errorCode, errorMessage };
  // what is kept of the record must be storable, else it would fail every retry in a query or an append
  if (hasUnstorableText(update) || hasUnstorableText(s.biz_opaque_callback_data ?? null) || hasUnstorableText(value.phoneNumberId ?? null)) {
    throw new PoisonRecordError(`status of ${JSON.stringify(s.id)}: contains text that cannot be stored (U+0000 or an unpaired UTF-16 surrogate)`);
  }
  if (typeof s.biz_opaque_callback_data === 'string' && s.biz_opaque_callback_data !== '') update.clientReference = s.biz_opaque_callback_data;
  if (typeof value.phoneNumberId === 'string' && value.phoneNumberId !== '') update.phoneNumberId = value.phoneNumberId;
  return update;
}
