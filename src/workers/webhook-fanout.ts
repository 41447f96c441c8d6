import type { Pool, PoolClient } from 'pg';
import type { Services } from '../services';
import { START, type Position, type ReadAllBatch, type RecordedEvent } from '../ports/event-store';
import { type LogReader, upToUnreadable } from '../projections/projection';
import { queueDeliveries, type NewDelivery } from '../projections/webhooks/deliveries';
import { secondsBehind } from '../projections/store';
import { inTransaction, withSessionLock } from '../shared/tx';
import { enabledEndpointsOf } from '../projections/webhooks/queries';
import { sendsProjection } from '../projections/sends/projection';
import { bulkProjection } from '../projections/bulk/projection';
import { webhooksProjection } from '../projections/webhooks/projection';
import { continuesUpsert, SOURCE_EVENT_TYPES, toWebhookEvents } from './webhook-events';
import { intakeOf } from './webhook-handoff';
import { largestEventEstimate, nextReadSize } from '../projections/read-sizes';

// The fan-out (docs/webhooks.md): reads the event log from its checkpoint and queues one delivery per (webhook
// event, subscribed endpoint) in the same transaction as the new checkpoint. A session advisory lock lets one
// process fan out at a time (a dead process's session ends and frees it); a crash repeats a batch, and the
// deliveries it queues again are recognised (unique per endpoint and webhook-id).

const NAME = 'fanout';
const LOCK = 'webhooks:fanout';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The read models the fan-out waits for before it builds a batch's webhooks (each stops before an unreadable event
// it handles): the endpoint list first, then, when an endpoint is subscribed, the status records.
const ENDPOINT_READ_MODELS = [webhooksProjection];
const STATUS_READ_MODELS = [sendsProjection, bulkProjection];
const READ_MODELS = [...ENDPOINT_READ_MODELS, ...STATUS_READ_MODELS];

/** The fan-out's checkpoint (undefined before a fan-out ever started). */
async function checkpointOf(db: Pool | PoolClient): Promise<Position | undefined> {
  const cp = await db.query<{ position: string }>('SELECT position FROM webhooks.fanout_checkpoint WHERE name = $1', [NAME]);
  return cp.rows[0]?.position as Position | undefined;
}

/** How far the fan-out is behind the log, in seconds (GET /metrics; 0 before it ever ran, at the head, or caught up). */
export async function fanOutLagSeconds(services: Pick<Services, 'pool' | 'store'>, now: Date): Promise<number> {
  const position = await checkpointOf(services.pool);
  return position === undefined ? 0 : secondsBehind(services.store, position, now);
}

export interface FanOutOptions {
  batchSize?: number;
  /** pause between batches that were not full, so sends are fanned out in batches (hot path) */
  gatherMs?: number;
  pollMs?: number;
}

export function startWebhookFanOut(services: Services, options: FanOutOptions = {}): { stop(): Promise<void> } {
  const batchSize = options.batchSize ?? 1000;
  const gatherMs = options.gatherMs ?? 50;
  const pollMs = options.pollMs ?? 250;
  let running = true;
  let wake: (() => void) | undefined;
  const unsubscribe = services.store.onAppended(() => wake?.());

  const loop = (async () => {
    await services.pool.query(`INSERT INTO webhooks.fanout_checkpoint (name, position) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [NAME, START]);
    let failures = 0;
    const idle: IdleHint = {};
    // each read sized by the largest event of the last (nextReadSize): batchSize while events are small
    const sizing: FanOutSizing = { size: 1, max: batchSize };
    while (running) {
      let read = 0;
      const asked = sizing.size;
      try {
        read = await fanOutBatch(services, sizing, idle);
        failures = 0;
      } catch (err) {
        failures++;
        services.logger.error({ err }, 'webhook fan-out batch failed');
        await sleep(Math.min(5000, 50 * 2 ** Math.min(failures, 7)));
        continue;
      }
      if (read >= asked) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => { wake = undefined; resolve(); }, pollMs);
        wake = () => { clearTimeout(timer); wake = undefined; setTimeout(resolve, gatherMs); };
      });
    }
  })();

  return {
    async stop() {
      running = false;
      unsubscribe();
      wake?.();
      await loop;
    },
  };
}

/**
 * What the last batch of this process found: `nothingAfter`, the checkpoint it read, with no event after it then
 * (at `since`, ms). The next batch first looks for an event after it (one statement) and stops there when there is
 * none, instead of taking the lock and reading the checkpoint (four statements, several times a second while idle).
 * The fan-out only moves its checkpoint forward, so nothing after an earlier value means nothing after the current
 * one; the whole check still runs every FULL_CHECK_EVERY_MS (a checkpoint an operator set back by hand).
 */
export interface IdleHint {
  nothingAfter?: Position;
  since?: number;
}
const FULL_CHECK_EVERY_MS = 10_000;

/**
 * How many events the fan-out's next read asks for (`size`, at most `max`): fanOutBatch sets it from the largest event
 * it read (nextReadSize). Before review 20 every read asked for 1,001 events whatever their size: a log of 1,000 bulk
 * chunks of 256 KiB was one read, and a 192 MB heap ran out.
 */
export interface FanOutSizing {
  size: number;
  max: number;
}

/**
 * One batch of `size` events: a number, or the loop's FanOutSizing (`size.size` events, and the next read's size set
 * from the largest of them). Returns how many log events it read (0: nothing new, or another process holds the
 * fan-out; at least the size asked: more follow at once).
 * Only the last step is a transaction (the deliveries and the new checkpoint, together): an open transaction
 * would hold back every reader of the event log (readAll stops below the oldest running transaction).
 */
export async function fanOutBatch(services: Services, size: number | FanOutSizing, idle: IdleHint = {}): Promise<number> {
  const batchSize = typeof size === 'number' ? size : size.size;
  const { nothingAfter, since = 0 } = idle;
  if (nothingAfter !== undefined && Date.now() - since < FULL_CHECK_EVERY_MS && (await services.runner.reader.readAll(nothingAfter, 1)).events.length === 0) return 0;
  idle.nothingAfter = undefined;
  // one process at a time; a paused holder loses the lock after SESSION_LOCK_IDLE_TIMEOUT_MS (src/shared/tx.ts)
  const fannedOut = await withSessionLock(services.pool, LOCK, async (client) => {
    const position = (await checkpointOf(client))!; // the row is made before the fan-out's first batch
    // the log as the projections read it: an event its schema refuses stops the fan-out only if it is one it fans out
    // or one its read models handle (`reads`)
    const whole = await readWholeUpserts(services.runner.reader, position, batchSize);
    // an empty read says nothing of the events to come: the size stays
    if (typeof size !== 'number' && whole.batch.events.length > 0) size.size = nextReadSize(batchSize, largestEventEstimate(whole.batch.events), size.max);
    // such an event stops it just before it, or before its contact upsert (no client's webhook skipped or split);
    // others are passed over
    const batch = beforeUnreadable(whole.batch);
    const read = batch === whole.batch ? whole.read : batch.events.length;
    if (batch.events.length === 0) {
      idle.nothingAfter = position;
      idle.since = Date.now();
      return 0;
    }
    const relevant = batch.events.filter((e) => SOURCE_EVENT_TYPES.includes(e.type));
    const deliveries: NewDelivery[] = [];
    if (relevant.length > 0) {
      const companies = [...new Set(relevant.map((e) => (e.data as { companyId: number }).companyId))];
      // the endpoint list and the status records must include this batch: let those read models pass it first
      const last = batch.events[batch.events.length - 1].position;
      await services.runner.waitFor(last, ENDPOINT_READ_MODELS, 30_000);
      const subscribed = await enabledEndpointsOf(client, companies);
      if (subscribed.length > 0) {
        await services.runner.waitFor(last, STATUS_READ_MODELS, 30_000);
        for (const w of await toWebhookEvents(services.pool, relevant)) {
          for (const ep of subscribed) {
            if (ep.companyId !== w.companyId || !ep.eventTypes.includes(w.type)) continue;
            if (services.store.comparePositions(w.position as Position, ep.createdPosition as Position) <= 0) continue;
            deliveries.push({ endpointId: ep.endpointId, companyId: w.companyId, webhookId: w.webhookId, eventType: w.type, payload: w.payload });
          }
        }
      }
    }
    // fresh deliveries go to this process's sender already claimed, as many as it has room for (./webhook-handoff.ts)
    const now = services.now();
    const handOff = deliveries.length > 0 ? intakeOf(services.pool) : undefined;
    const claim = handOff ? { count: handOff.capacity, until: handOff.intake.leaseUntil(now) } : undefined;
    // on the client holding the fan-out's session lock
    const { queued, claimed } = await inTransaction(client, async (tx) => {
      const result = await queueDeliveries(tx, deliveries, now, claim);
      await tx.query('UPDATE webhooks.fanout_checkpoint SET position = $2, updated_at = now() WHERE name = $1', [NAME, batch.nextPosition]);
      return result;
    });
    if (handOff && claim && claimed.length > 0) handOff.intake.receive(claimed, claim.until);
    if (queued.length > claimed.length) notifySender();
    return read;
  });
  return fannedOut ?? 0; // undefined: another process holds the fan-out
}

/**
 * Up to `batchSize` events after `position`, ending with a whole contact upsert: one contact.upserted is made from
 * its events together (./webhook-events.ts), so a batch never ends inside one. One event more is read to see whether
 * the last one's upsert goes on; if it does, the batch stops before that upsert, or, when the batch is that upsert
 * alone, reads on to its end. An append commits whole, so a read that comes back short ends with a whole upsert.
 * `read`: how many events were read from the log.
 */
async function readWholeUpserts(store: LogReader, position: Position, batchSize: number): Promise<{ batch: ReadAllBatch; read: number }> {
  const first = await store.readAll(position, batchSize + 1);
  let read = first.events.length;
  if (read <= batchSize) return { batch: first, read };
  const events = first.events.slice(0, batchSize);
  if (!continuesUpsert(events[batchSize - 1], first.events[batchSize])) return { batch: batchOf(events), read };
  let start = batchSize - 1;
  while (start > 0 && continuesUpsert(events[start - 1], events[start])) start--;
  if (start > 0) return { batch: batchOf(events.slice(0, start)), read };
  events.push(first.events[batchSize]);
  for (;;) {
    const more = await store.readAll(events[events.length - 1].position, batchSize);
    read += more.events.length;
    const end = more.events.findIndex((e) => !continuesUpsert(events[0], e));
    events.push(...(end < 0 ? more.events : more.events.slice(0, end)));
    if (end >= 0 || more.events.length < batchSize) return { batch: batchOf(events), read };
  }
}

const batchOf = (events: RecordedEvent[]): ReadAllBatch => ({ events, nextPosition: events[events.length - 1].position });

/**
 * Whether the fan-out must not pass `e` unread: it turns events of its type into webhooks, or one of the read models
 * it waits for handles it. Such a read model stops just before an unreadable event of its types, and the fan-out,
 * which waits for it to pass the batch's end, failed each batch holding one after a 30-s wait, with the webhooks of
 * the events before it (regression review 13, 2026-11-28).
 */
const reads = (e: RecordedEvent): boolean => SOURCE_EVENT_TYPES.includes(e.type) || READ_MODELS.some((p) => p.handles.includes(e.type));

/**
 * `upToUnreadable` of the events the fan-out reads (`reads`), never ending inside a contact upsert: when the
 * unreadable event belongs to one (one append of the contact's stream, one contact.upserted), the batch ends before
 * the upsert's first event, and fails on the unreadable event when the upsert begins the batch. Cut inside it, the
 * upsert gave two webhooks (regression review 13, 2026-11-28): a contact.upserted of its first events, without the
 * unreadable one's field, and, once that could be read, another (`created: false`, another webhook-id) of the rest.
 */
function beforeUnreadable(whole: ReadAllBatch): ReadAllBatch {
  const batch = upToUnreadable(whole, reads);
  const n = batch.events.length;
  if (batch === whole || !continuesUpsert(batch.events[n - 1], whole.events[n])) return batch;
  let start = n - 1;
  while (start > 0 && continuesUpsert(batch.events[start - 1], batch.events[start])) start--;
  // the upsert begins the batch: fail on its unreadable event, as when that event comes first
  if (start === 0) return upToUnreadable(batchOf(whole.events.slice(n)), reads);
  return batchOf(batch.events.slice(0, start));
}

// In-process nudge: deliveries were queued unclaimed; the sender of this process claims them at once instead of at
// its next poll.
const senderWakers = new Set<() => void>();
export const onDeliveriesQueued = (wake: () => void): (() => void) => {
  senderWakers.add(wake);
  return () => senderWakers.delete(wake);
};
export const notifySender = (): void => {
  for (const w of senderWakers) w();
};
