// Finding the send or bulk recipient that owns a provider message id: one query for a batch's ids, the batch path's
// one wait for the owners of a call it did not find, and the per-record lookup that waits briefly in place. With parking (the Kafka transport; docs/sends.md, "Delivery
// consumer"), a status whose owner is still unknown after that wait is to be parked (parked-statuses.ts), and so is
// any status of a provider id with statuses parked already (they apply in order); without parking (in-process), it
// is retried by the transport until the grace period ends (then dead-lettered).
import type { Services } from '../services';
import { reconcileSendFromStatus } from '../commands/send/reconcile';
import { PoisonRecordError } from '../ports/transport';
import { SENDS_SCHEMA } from '../projections/sends/projection';
import { findProviderMessageOwner, type ProviderMessageOwner } from '../projections/sends/queries';
// [bulk sends, issue 5] bulk recipients own provider message ids too: owner lookup and applier in src/commands/bulk/delivery.ts
import { BULK_OWNERS_SELECT, bulkOwnerFromRow, findBulkMessageOwner } from '../commands/bulk/delivery';
import type { ProviderStatusUpdate } from '../commands/delivery-status';
import { Lru } from '../shared/lru';
import { statusIdentity } from './send-status-applier';
import { hasParkedStatuses, PARKED_IDS_SELECT } from './parked-statuses';

/** [issue 16] A status naming a keyed send whose answer was never recorded records that answer (per-record path only). */
export const reconciledOwner = (services: Services, update: ProviderStatusUpdate) =>
  update.clientReference === undefined
    ? undefined
    : reconcileSendFromStatus(services, {
      clientReference: update.clientReference,
      providerMessageId: update.providerMessageId,
      phoneNumberId: update.phoneNumberId ?? null,
      at: update.at,
    });

class OwnerNotYetKnownError extends Error {
  override name = 'OwnerNotYetKnownError';
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const MAX_TRACKED = 100_000;
const RECONCILE_AT_ONCE = 8;

/** Owners of provider message ids, one query: the single sends' owner index and the bulk recipients. */
export async function findProviderMessageOwners(services: Services, ids: readonly string[]): Promise<Map<string, ProviderMessageOwner>> {
  return (await ownersQuery(services, ids, false)).owners;
}

/**
 * The same query, which with `withParked` also names the provider ids with parked statuses (same statement: the
 * batch's hot path keeps its single owner query); without it, `parked` is empty.
 */
export async function findOwnersAndParked(
  services: Services,
  ids: readonly string[],
  withParked: boolean,
): Promise<{ owners: Map<string, ProviderMessageOwner>; parked: Set<string> }> {
  return ownersQuery(services, ids, withParked);
}

async function ownersQuery(services: Services, ids: readonly string[], withParked: boolean) {
  const out = new Map<string, ProviderMessageOwner>();
  const parked = new Set<string>();
  if (ids.length === 0) return { owners: out, parked };
  const r = await services.pool.query<{
    provider_message_id: string; rank: number; kind: string; stream_id: string | null; company_id: number; bulk_id: string | null; chunk: number | null;
  }>(
    `SELECT provider_message_id, 0 AS rank, kind, stream_id, company_id, NULL::text AS bulk_id, NULL::int AS chunk
       FROM ${SENDS_SCHEMA}.provider_messages WHERE provider_message_id = ANY($1::text[])
     UNION ALL ${BULK_OWNERS_SELECT}${withParked ? `
     UNION ALL ${PARKED_IDS_SELECT}` : ''}
     ORDER BY rank`,
    [ids],
  );
  for (const row of r.rows) {
    if (row.kind === 'parked' && row.rank === 9) {
      parked.add(row.provider_message_id);
      continue;
    }
    if (out.has(row.provider_message_id)) continue; // the lowest rank wins
    out.set(
      row.provider_message_id,
      row.rank === 0
        ? { providerMessageId: row.provider_message_id, kind: row.kind, streamId: row.stream_id!, companyId: row.company_id }
        : bulkOwnerFromRow({ provider_message_id: row.provider_message_id, company_id: row.company_id, bulk_id: row.bulk_id!, chunk: row.chunk! }),
    );
  }
  return { owners: out, parked };
}

/**
 * The batch path's wait for owners not known yet (with parking): one wait for all the statuses of a consumer call
 * whose owner the call's owner query did not find, up to `waitMs` (the common race: a send's acceptance still being
 * recorded). Each look is one owner query over the ids still unknown, which also names ids parked meanwhile; the wait
 * ends once every id is found. Then [issue 16] a status whose id is still unknown may name a keyed send to reconcile.
 * The ids neither owned nor parked then are to be parked.
 */
export async function waitForOwners(
  services: Services,
  updates: readonly ProviderStatusUpdate[],
  waitMs: number,
): Promise<{ owners: Map<string, ProviderMessageOwner>; parked: Set<string> }> {
  const owners = new Map<string, ProviderMessageOwner>();
  const parked = new Set<string>();
  let pending = [...new Set(updates.map((u) => u.providerMessageId))];
  if (waitMs > 0) services.metrics.deliveryOwnerWaits.inc();
  const started = Date.now();
  for (let delay = 10; pending.length > 0; delay = Math.min(delay * 2, 200)) {
    const left = waitMs - (Date.now() - started);
    if (left <= 0) break;
    await sleep(Math.min(delay, left));
    const found = await ownersQuery(services, pending, true);
    for (const [id, owner] of found.owners) owners.set(id, owner);
    for (const id of found.parked) parked.add(id);
    pending = pending.filter((id) => !owners.has(id) && !parked.has(id));
  }
  const referenced = new Map<string, ProviderStatusUpdate>();
  for (const u of updates) if (u.clientReference !== undefined && !referenced.has(u.providerMessageId)) referenced.set(u.providerMessageId, u);
  const toReconcile = pending.filter((id) => referenced.has(id));
  for (let k = 0; k < toReconcile.length; k += RECONCILE_AT_ONCE) {
    await Promise.all(toReconcile.slice(k, k + RECONCILE_AT_ONCE).map(async (id) => {
      const owner = await reconciledOwner(services, referenced.get(id)!);
      if (owner) owners.set(id, owner);
    }));
  }
  return { owners, parked };
}

/** What the per-record lookup says of a status to park rather than apply now. */
export const PARK = 'park' as const;

/**
 * The per-record owner lookup: cached owners, else the owner indexes, waited for in place up to `ownerWaitMs`.
 * With `park`: a status of a provider id with parked statuses is to be parked after them (checked on a cache miss
 * only: an owner is cached only when no status of its id was parked, and none is parked once the owner is known),
 * and so is a status whose owner is still unknown after the wait; such an owner is not cached. Without `park`:
 * `firstSeen` holds when a status with no owner yet was first seen; it is retried (OwnerNotYetKnownError), then
 * dead-lettered `ownerGraceMs` after.
 */
export function createOwnerFinder(services: Services, options: { ownerGraceMs?: number; ownerWaitMs?: number; park?: boolean }) {
  const graceMs = options.ownerGraceMs ?? 60_000;
  const waitMs = options.ownerWaitMs ?? 500;
  const park = options.park ?? false;
  const firstSeen = new Map<string, number>();
  const owners = new Lru<string, ProviderMessageOwner>(50_000); // an owner never changes once recorded

  const findOwner = async (update: ProviderStatusUpdate): Promise<ProviderMessageOwner | typeof PARK> => {
    const known = owners.get(update.providerMessageId);
    if (known) return known;
    if (park && (await hasParkedStatuses(services.pool, update.providerMessageId))) return PARK;
    const started = Date.now();
    for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
      const owner = (await findProviderMessageOwner(services.pool, update.providerMessageId))
        ?? (await findBulkMessageOwner(services.pool, update.providerMessageId)) // [bulk sends, issue 5]
        ?? (await reconciledOwner(services, update)); // [issue 16]
      if (owner) {
        owners.set(update.providerMessageId, owner);
        return owner;
      }
      if (Date.now() - started >= waitMs) break;
      if (delay === 10) services.metrics.deliveryOwnerWaits.inc();
      await sleep(Math.min(delay, Math.max(0, waitMs - (Date.now() - started))));
    }
    if (park) return PARK; // the sweeper applies it once the owner is known, or dead-letters it after the grace
    const identity = statusIdentity(update);
    const first = firstSeen.get(identity) ?? started;
    if (!firstSeen.has(identity)) {
      if (firstSeen.size >= MAX_TRACKED) firstSeen.delete(firstSeen.keys().next().value!);
      firstSeen.set(identity, first);
    }
    if (Date.now() - first >= graceMs) {
      firstSeen.delete(identity);
      throw new PoisonRecordError(`unknown provider message id ${update.providerMessageId} (status ${update.status}) after ${graceMs} ms`);
    }
    throw new OwnerNotYetKnownError(`no send owns provider message id ${update.providerMessageId} yet`);
  };

  return { owners, firstSeen, findOwner };
}
